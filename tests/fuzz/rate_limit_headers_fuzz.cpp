// libFuzzer: announced quotas are parsed without crashing, stay within their bounds, and the pace
// drawn from them is never above the configured limit, never negative, and never lets the
// partner run out before its reset.
//
// Input: three bytes choosing the configured rate, the burst and the Retry-After (0: none, else
// the byte minus 64 seconds), then lines; each line's first byte chooses the header name (and
// its case), the rest is the value.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "proto/announced_pace.hpp"
#include "proto/rate_limit_headers.hpp"

namespace {

using namespace std::chrono_literals;

// '0' to '5' choose the first six, '6' to ';' the others.
constexpr std::array<std::string_view, 12> names = {
    "RateLimit-Policy",      "RateLimit",         "X-RateLimit-Limit",
    "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After",
    "ratelimit-policy",      "RATELIMIT",         "x-ratelimit-limit",
    "x-ratelimit-remaining", "X-RATELIMIT-RESET", "X-RateLimit-Used"};
constexpr std::array<double, 8> rates = {0, 0.01, 0.5, 1, 3, 10, 250, 1e6};
constexpr std::array<double, 8> bursts = {0, 0.5, 1, 2, 7.5, 20, 1000, 1e9};

void check(bool ok) {
  if (!ok) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace surge::proto;
  if (size < 3) {
    return 0;
  }
  const configured_limit configured{rates[data[0] % rates.size()], bursts[data[1] % bursts.size()]};
  const std::optional<std::chrono::seconds> retry_after =
      data[2] == 0 ? std::nullopt : std::optional(std::chrono::seconds(data[2] - 64));
  std::string_view rest(reinterpret_cast<const char*>(data + 3), size - 3);

  quota_fields fields;
  while (!rest.empty()) {
    const std::size_t end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    if (!line.empty()) {
      fields.add(names[static_cast<unsigned char>(line[0]) % names.size()], line.substr(1));
    }
  }

  // Half a second into a second, so the rounding of Unix-time resets is exercised.
  const auto now = std::chrono::system_clock::time_point(1'700'000'000s) + 500ms;
  const auto quota = parse_announced_quota(fields, now);
  if (quota) {
    check(quota->reset_at > now && quota->reset_at <= now + 24h);
    check(quota->reset_after >= 1s && quota->reset_after <= 24h);
    check(quota->remaining <= 999'999'999'999'999u);
    check(!quota->window || quota->window->count() > 0);
    check(quota->form == quota_form::x_ratelimit || quota->reset_at == now + quota->reset_after);
  }

  const auto pace = pace_for_quota(configured, quota, retry_after, now);
  const double burst = std::max(1.0, configured.burst);
  check(std::isfinite(pace.rate) && pace.rate >= 0 && pace.rate <= configured.rate);
  check(pace.burst >= 1 && pace.burst <= burst);
  switch (pace.kind) {
    case pace_kind::configured:
      check(pace.rate == configured.rate && pace.burst == burst && pace.until == now);
      break;
    case pace_kind::paused: check(quota && pace.rate == 0 && pace.until == quota->reset_at); break;
    case pace_kind::reduced: {
      check(quota && pace.rate > 0 && pace.until == quota->reset_at);
      const double waited = retry_after ? std::max<double>(0, retry_after->count()) : 0;
      const double window = std::chrono::duration<double>(quota->reset_at - now).count() - waited;
      const double sent = pace.burst + pace.rate * window;
      check(sent <= static_cast<double>(quota->remaining) * (1 + 1e-9));
      break;
    }
  }
  return 0;
}
