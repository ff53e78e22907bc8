#pragma once
// One attempt's pure parts: the request it sends (DESIGN section 4) and what its result means
// for the row and the subscriber. No I/O, so both are tested without sockets.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/http_client.hpp"
#include "proto/retry_policy.hpp"
#include "proto/signing.hpp"
#include "proto/target_policy.hpp"
#include "storage/claims.hpp"
#include "storage/outcomes.hpp"

namespace surge::engine {

// Why the row cannot be sent (a value from the queue that would reach a header unchecked, e.g.
// "unsafe event_type: contains CR/LF"), or empty when it can. Checked before the attempt takes a
// token, so such a row is dead-lettered before any byte is sent.
std::string delivery_refusal(const storage::claimed_row& row);

// The stored payload unchanged, Content-Type application/json, X-VVV-Event, X-VVV-Delivery-Id,
// X-VVV-Attempt, User-Agent, and the signature headers of the subscriber's scheme for this
// attempt's timestamp. The Standard Webhooks id is "msg_<row id>", stable across retries.
// Throws std::invalid_argument if a header value or the request target is unsafe (the checks
// above and in parse_target_url keep that from happening).
http_request build_delivery_request(const proto::target& target, const proto::signer& signer,
                                    const storage::claimed_row& row, std::int64_t unix_seconds,
                                    std::string_view user_agent);

struct attempt_judgement {
  storage::outcome outcome;  // fenced on the row's lease, with its surge_attempt record
  std::optional<std::chrono::milliseconds> pause_subscriber;
  bool deactivate_subscriber = false;
  int unpaid_rate_limits = 0;  // the subscriber's streak after this attempt
};

struct attempt_times {
  double started_unix = 0;
  double finished_unix = 0;
  std::chrono::system_clock::time_point now;  // for HTTP-date Retry-After values
};

// `unit_random` in [0, 1) drives the backoff jitter. `unpaid_rate_limits` is the subscriber's
// streak of 429s without a usable Retry-After so far (proto::decide).
attempt_judgement judge_attempt(const storage::claimed_row& row, std::int64_t subscriber_id,
                                const http_result& result, const attempt_times& times,
                                const proto::retry_policy& policy,
                                std::chrono::seconds retry_after_cap, double unit_random,
                                int unpaid_rate_limits = 0);

// A row handed back or closed without an attempt (release, dead-letter, reschedule).
storage::outcome outcome_for(const storage::claimed_row& row, storage::outcome_kind kind);

}  // namespace surge::engine
