#include "proto/outcome.hpp"

#include <algorithm>
#include <array>
#include <climits>

namespace surge::proto {
namespace {

using std::chrono::milliseconds;

constexpr int first_code = 100;
constexpr int last_code = 599;
constexpr std::string_view redirect_suffix = " redirect not followed";
constexpr std::size_t http_text_size = 8;  // "http NNN"
constexpr std::size_t redirect_text_size = http_text_size + redirect_suffix.size();

// Reasons must outlive the decision (they end up in batched database writes), so every status
// gets its own text in static storage, built at compile time.
template <std::size_t Size>
constexpr std::array<char, Size> status_text(int code, std::string_view suffix) {
  std::array<char, Size> text{};
  constexpr std::string_view prefix = "http ";
  std::size_t n = 0;
  for (char c : prefix) text[n++] = c;
  text[n++] = static_cast<char>('0' + code / 100);
  text[n++] = static_cast<char>('0' + code / 10 % 10);
  text[n++] = static_cast<char>('0' + code % 10);
  for (char c : suffix) text[n++] = c;
  return text;
}

constexpr auto http_texts = [] {
  std::array<std::array<char, http_text_size>, last_code - first_code + 1> texts{};
  for (int code = first_code; code <= last_code; ++code) {
    texts[static_cast<std::size_t>(code - first_code)] = status_text<http_text_size>(code, "");
  }
  return texts;
}();

constexpr auto redirect_texts = [] {
  std::array<std::array<char, redirect_text_size>, 100> texts{};
  for (int code = 300; code <= 399; ++code) {
    texts[static_cast<std::size_t>(code - 300)] =
        status_text<redirect_text_size>(code, redirect_suffix);
  }
  return texts;
}();

std::string_view http_reason(int status) {
  const auto& text = http_texts[static_cast<std::size_t>(status - first_code)];
  return {text.data(), text.size()};
}

std::string_view redirect_reason(int status) {
  const auto& text = redirect_texts[static_cast<std::size_t>(status - 300)];
  return {text.data(), text.size()};
}

std::string_view transport_reason(transport_error error) {
  switch (error) {
    case transport_error::none: return "no error";
    case transport_error::resolve: return "dns lookup failed";
    case transport_error::refused_target: return "target address refused by policy";
    case transport_error::connect: return "connect failed";
    case transport_error::connect_timeout: return "connect timed out";
    case transport_error::tls: return "tls handshake failed";
    case transport_error::send: return "send failed";
    case transport_error::reset_before_response: return "connection closed before response";
    case transport_error::receive: return "receive failed";
    case transport_error::timeout: return "attempt timed out";
    case transport_error::protocol: return "invalid http response";
  }
  return "unknown transport error";
}

milliseconds to_millis(std::chrono::seconds s) {
  return std::chrono::duration_cast<milliseconds>(s);
}

decision dead(std::string_view reason) {
  decision d;
  d.what = verdict::dead;
  d.reason = reason;
  return d;
}

// The common path for a failure that uses up an attempt: the attempt limit first, then the
// retry window measured at the time the next attempt would happen.
decision counted_failure(std::string_view reason, int attempts_before,
                         std::chrono::duration<double> age, const retry_policy& policy,
                         std::optional<milliseconds> fixed_delay, double unit_random) {
  const int attempts_made = attempts_before < INT_MAX ? std::max(attempts_before, 0) + 1 : INT_MAX;
  if (policy.attempts_exhausted(attempts_made)) return dead("attempt limit");
  const milliseconds delay =
      fixed_delay ? *fixed_delay : policy.backoff(attempts_made, unit_random);
  if (policy.past_window(age, delay)) return dead("retry window");
  decision d;
  d.what = verdict::retry;
  d.delay = delay;
  d.reason = reason;
  return d;
}

decision rate_limited(const attempt_result& result, int attempts_before,
                      std::chrono::duration<double> age, const retry_policy& policy,
                      double unit_random, int unpaid_rate_limits) {
  const milliseconds pause = result.retry_after
                                 ? to_millis(*result.retry_after)
                                 : policy.backoff(std::max(attempts_before, 1), unit_random);
  if (!result.retry_after && unpaid_rate_limits >= policy.config().max_unpaid_rate_limits) {
    // Past the cap the 429 is an ordinary failure, so the attempt limit bounds it; the subscriber
    // still pauses, by the growing backoff when the row is retried.
    decision d =
        counted_failure(http_reason(429), attempts_before, age, policy, std::nullopt, unit_random);
    d.pause_subscriber = d.what == verdict::retry ? d.delay : pause;
    return d;
  }
  // Without the window check a receiver that always answers 429 would keep the row forever,
  // since 429 never uses up an attempt.
  decision d = policy.past_window(age, pause) ? dead("retry window") : decision{};
  if (d.what != verdict::dead) {
    d.what = verdict::retry;
    d.delay = pause;
    d.reason = http_reason(429);
  }
  d.counts_attempt = false;
  // The pause concerns the subscriber, so it holds even when this row gives up.
  d.pause_subscriber = pause;
  return d;
}

}  // namespace

std::string_view to_string(transport_error error) {
  switch (error) {
    case transport_error::none: return "none";
    case transport_error::resolve: return "resolve";
    case transport_error::refused_target: return "refused_target";
    case transport_error::connect: return "connect";
    case transport_error::connect_timeout: return "connect_timeout";
    case transport_error::tls: return "tls";
    case transport_error::send: return "send";
    case transport_error::reset_before_response: return "reset_before_response";
    case transport_error::receive: return "receive";
    case transport_error::timeout: return "timeout";
    case transport_error::protocol: return "protocol";
  }
  return "unknown";
}

status_class classify_status(int status) {
  if (status >= 200 && status <= 299) return status_class::success;
  if (status >= 300 && status <= 399) return status_class::redirect;
  if (status == 429) return status_class::rate_limited;
  if (status == 410) return status_class::gone;
  if (status == 503) return status_class::unavailable;
  if (status >= 400 && status <= 499) return status_class::client_error;
  if (status >= 500 && status <= 599) return status_class::server_error;
  return status_class::invalid;
}

bool asks_to_slow_down(int status) {
  const auto kind = classify_status(status);
  return kind == status_class::rate_limited || kind == status_class::unavailable;
}

endpoint_reading read_endpoint(int status, transport_error error, bool names_retry_after) {
  endpoint_reading out;
  if (status == 0) {
    out.unwell = error != transport_error::refused_target;
    return out;
  }
  const auto kind = classify_status(status);
  out.delivered = kind == status_class::success;
  out.pushback = asks_to_slow_down(status);
  out.unwell = (kind == status_class::server_error) ||
               (kind == status_class::unavailable && !names_retry_after) ||
               (kind == status_class::invalid && status >= 600);
  out.alive = !out.unwell;
  return out;
}

int next_unpaid_rate_limits(const attempt_result& result, int streak) {
  if (result.error != transport_error::none) return streak;
  if (classify_status(result.status) == status_class::rate_limited && !result.retry_after) {
    return streak < INT_MAX ? std::max(streak, 0) + 1 : INT_MAX;
  }
  return 0;
}

decision decide(const attempt_result& result, int attempts_before,
                std::chrono::duration<double> age, const retry_policy& policy, double unit_random,
                int unpaid_rate_limits) {
  if (result.error != transport_error::none) {
    return counted_failure(transport_reason(result.error), attempts_before, age, policy,
                           std::nullopt, unit_random);
  }
  switch (classify_status(result.status)) {
    case status_class::success: return decision{};
    case status_class::gone: {
      decision d = dead("410 gone");
      d.deactivate_subscriber = true;
      return d;
    }
    case status_class::rate_limited:
      return rate_limited(result, attempts_before, age, policy, unit_random, unpaid_rate_limits);
    case status_class::unavailable:
      if (result.retry_after) {
        const milliseconds pause = to_millis(*result.retry_after);
        decision d =
            counted_failure(http_reason(503), attempts_before, age, policy, pause, unit_random);
        d.pause_subscriber = pause;
        return d;
      }
      return counted_failure(http_reason(503), attempts_before, age, policy, std::nullopt,
                             unit_random);
    case status_class::redirect:
      return counted_failure(redirect_reason(result.status), attempts_before, age, policy,
                             std::nullopt, unit_random);
    case status_class::client_error:
    case status_class::server_error:
      return counted_failure(http_reason(result.status), attempts_before, age, policy, std::nullopt,
                             unit_random);
    case status_class::invalid: break;
  }
  return counted_failure("invalid http status", attempts_before, age, policy, std::nullopt,
                         unit_random);
}

}  // namespace surge::proto
