#pragma once
// What one attempt's result means for the row and for its subscriber.
#include <chrono>
#include <optional>
#include <string_view>

#include "proto/retry_policy.hpp"

namespace surge::proto {

// Transport failures, named by where they happened so that retries and metrics can tell them
// apart. `ambiguous` failures happened after the request was (perhaps) fully sent.
enum class transport_error {
  none,
  resolve,         // DNS lookup failed
  refused_target,  // every resolved address is refused by the target policy
  connect,         // TCP connect refused / unreachable
  connect_timeout,
  tls,                    // handshake or certificate verification failed
  send,                   // failed while writing the request
  reset_before_response,  // connection closed/reset after the request, before a response byte
  receive,                // failed while reading a started response
  timeout,                // the whole-attempt deadline passed
  protocol,               // unparseable response
};

std::string_view to_string(transport_error error);

enum class status_class {
  success,
  redirect,
  rate_limited,
  gone,
  client_error,
  unavailable,
  server_error,
  invalid
};

status_class classify_status(int status);

// Whether the partner asks to be sent less (429, 503): Retry-After is honoured on these only.
bool asks_to_slow_down(int status);

// What one answer says about the endpoint itself, beside what it means for the row (decide()):
// the circuit breaker and the adaptive pace read it. `status` is 0 when no answer came.
struct endpoint_reading {
  bool delivered = false;  // 2xx
  bool pushback = false;   // 429 or 503: it asks to be sent less
  // 5xx, or no answer at all: the endpoint is unwell. A 503 that says when to come back is
  // pushback, not illness; a target our own policy refused says nothing about the endpoint.
  bool unwell = false;
  bool alive = false;  // any other answer
};
endpoint_reading read_endpoint(int status, transport_error error, bool names_retry_after);

struct attempt_result {
  int status = 0;  // 0 when a transport error happened
  transport_error error = transport_error::none;
  std::optional<std::chrono::seconds> retry_after;  // parsed and capped already
};

enum class verdict { done, retry, dead };

struct decision {
  verdict what = verdict::done;
  bool counts_attempt = true;          // a 429 does not use up an attempt
  std::chrono::milliseconds delay{0};  // until the next attempt, for verdict::retry
  // Pause the whole subscriber this long (429/503 with Retry-After; 429 without it).
  std::optional<std::chrono::milliseconds> pause_subscriber;
  bool deactivate_subscriber = false;  // 410 Gone
  std::string_view reason;             // short static text for last_error / logs; empty on done
};

// `attempts_before` is the row's attempts column before this attempt; `age` is now - created_at.
// `unit_random` in [0, 1) drives the jitter. `unpaid_rate_limits` is the subscriber's streak of
// 429s without a usable Retry-After before this answer (see next_unpaid_rate_limits): from
// policy.max_unpaid_rate_limits on, such a 429 uses up an attempt like any other failure.
decision decide(const attempt_result& result, int attempts_before,
                std::chrono::duration<double> age, const retry_policy& policy, double unit_random,
                int unpaid_rate_limits = 0);

// The subscriber's streak after `result`: one more for a 429 without a usable Retry-After, zero
// after any other answer; a transport error (no answer) leaves it as it was.
int next_unpaid_rate_limits(const attempt_result& result, int streak);

}  // namespace surge::proto
