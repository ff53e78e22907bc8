// Signing cost per request, for both schemes, at a typical event size and at 4 KiB.
#include "proto/signing.hpp"

#include <benchmark/benchmark.h>

#include <string>

namespace {

using surge::proto::signer;
using surge::proto::signing_scheme;

std::string payload_of_size(std::size_t size) {
  std::string payload =
      R"({"event":"video.trending","video_id":"v_8f3a2c","views":1234567,"data":")";
  while (payload.size() + 2 < size) payload.push_back(static_cast<char>('a' + payload.size() % 26));
  payload += "\"}";
  return payload;
}

void sign_with(benchmark::State& state, signing_scheme scheme, std::string_view secret) {
  const auto s = signer::create(scheme, secret);
  if (!s) {
    state.SkipWithError("bad secret");
    return;
  }
  const std::string payload = payload_of_size(static_cast<std::size_t>(state.range(0)));
  std::int64_t ts = 1700000000;
  for (auto _ : state) {
    auto fields = s->sign("msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", ++ts, payload);
    benchmark::DoNotOptimize(fields);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(payload.size()));
}

void bm_sign_vvv(benchmark::State& state) {
  sign_with(state, signing_scheme::vvv, "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a6978");
}

void bm_sign_standard(benchmark::State& state) {
  sign_with(state, signing_scheme::standard, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
}

// Key rotation doubles the HMAC work; worth seeing next to the single-key case.
void bm_sign_standard_rotation(benchmark::State& state) {
  sign_with(state, signing_scheme::standard,
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD");
}

void bm_verify_standard(benchmark::State& state) {
  const std::string secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  const std::string payload = payload_of_size(static_cast<std::size_t>(state.range(0)));
  const auto fields = signer::create(signing_scheme::standard, secret)->sign("msg_1", 1, payload);
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        surge::proto::verify_standard(secret, "msg_1", "1", payload, fields.value(2)));
  }
}

BENCHMARK(bm_sign_vvv)->Arg(300)->Arg(4096);
BENCHMARK(bm_sign_standard)->Arg(300)->Arg(4096);
BENCHMARK(bm_sign_standard_rotation)->Arg(300)->Arg(4096);
BENCHMARK(bm_verify_standard)->Arg(300);

}  // namespace
