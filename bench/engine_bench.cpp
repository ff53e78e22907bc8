// The per-delivery work of a shard that is not I/O: a token-bucket take, building and signing the
// request's bytes as the client writes them, and parsing a typical response.
#include <benchmark/benchmark.h>

#include <chrono>
#include <string>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "engine/config.hpp"
#include "engine/shard/delivery.hpp"
#include "engine/net/response_parser.hpp"
#include "engine/limits/token_bucket.hpp"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using namespace surge;

constexpr std::string_view event_body =
    R"({"type":"video.trending","video_id":"v_8f3k2j9d","channel_id":"c_19283","title":"A clip )"
    R"(that went viral overnight","score":98.7,"velocity":1523.4,"rank":3,"region":"EU","tags":)"
    R"(["music","live","trending"],"thumbnail":"https://cdn.example.com/t/v_8f3k2j9d.jpg",)"
    R"("observed_at":"2026-11-21T06:00:00Z"})";

void bm_bucket_take(benchmark::State& state) {
  auto now = engine::token_bucket::clock::now();
  engine::token_bucket bucket(1e9, 1e6, 1e6, now);
  for (auto _ : state) {
    now += std::chrono::microseconds(1);
    benchmark::DoNotOptimize(bucket.try_take(now));
  }
}
BENCHMARK(bm_bucket_take);

storage::claimed_row sample_row() {
  storage::claimed_row row;
  row.id = 123456;
  row.subscriber_id = 42;
  row.event_type = "video.trending";
  row.payload = std::string(event_body);
  return row;
}

// Build + sign + serialise: the request's bytes as the client writes them, into a buffer reused
// from one request to the next as a shard reuses its request buffers.
void bm_build_request(benchmark::State& state, proto::signing_scheme scheme,
                      std::string_view secret) {
  const auto target = *proto::parse_target_url("https://partner.example/hooks/surge").value;
  const auto signer = proto::signer::create(scheme, secret);
  const auto row = sample_row();
  const auto head = engine::request_head(target, "surge-bench/1");
  std::string wire;
  std::int64_t ts = 1'700'000'000;
  for (auto _ : state) {
    engine::write_delivery_request(wire, head, *signer, row, ++ts);
    benchmark::DoNotOptimize(wire.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * wire.size()));
}
BENCHMARK_CAPTURE(bm_build_request, vvv, proto::signing_scheme::vvv,
                  "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a6978");
BENCHMARK_CAPTURE(bm_build_request, standard, proto::signing_scheme::standard,
                  "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");

// The same request built the plain Beast way: a message built field by field, then its
// serialiser's buffers copied out the way a gathered write reads them. Kept for the comparison.
void bm_build_request_beast(benchmark::State& state) {
  const auto target = *proto::parse_target_url("https://partner.example/hooks/surge").value;
  const auto signer = proto::signer::create(proto::signing_scheme::vvv,
                                            "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a6978");
  const auto row = sample_row();
  std::string wire;
  std::int64_t ts = 1'700'000'000;
  for (auto _ : state) {
    engine::http_request request{http::verb::post, target.path, 11};
    request.set(http::field::host, target.host_header);
    request.set(http::field::user_agent, "surge-bench/1");
    request.set(http::field::content_type, "application/json");
    request.set("X-VVV-Event", row.event_type);
    const std::string id = std::to_string(row.id);
    request.set("X-VVV-Delivery-Id", id);
    request.set("X-VVV-Attempt", std::to_string(row.attempts + 1));
    const auto fields = signer->sign("msg_" + id, ++ts, row.payload);
    for (std::size_t i = 0; i < fields.size(); ++i) {
      request.set(fields.name(i), fields.value(i));
    }
    request.body() = row.payload;
    request.prepare_payload();
    engine::write_request(wire, request);
    benchmark::DoNotOptimize(wire.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * wire.size()));
}
BENCHMARK(bm_build_request_beast);

void bm_parse_response(benchmark::State& state) {
  const std::string wire =
      "HTTP/1.1 200 OK\r\nServer: partner\r\nContent-Type: application/json\r\n"
      "Date: Sat, 21 Nov 2026 06:00:00 GMT\r\nContent-Length: 17\r\n"
      "Connection: keep-alive\r\n\r\n{\"ok\":true,\"n\":1}";
  engine::http_client_config config;
  for (auto _ : state) {
    engine::response_parser parser;
    engine::prepare_for_header(parser, config);
    engine::prepare_for_body(parser, config);
    beast::error_code ec;
    parser.eager(true);
    parser.put(boost::asio::buffer(wire), ec);
    benchmark::DoNotOptimize(parser.status());
    if (ec || !parser.is_done()) state.SkipWithError("response did not parse");
  }
}
BENCHMARK(bm_parse_response);

}  // namespace
