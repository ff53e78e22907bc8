#pragma once
// One attempt's pure parts: the request it sends and what its result means
// for the row and the subscriber. No I/O, so both are tested without sockets.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <span>
#include <string_view>
#include <vector>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/container/small_vector.hpp>

#include "engine/net/http_result.hpp"
#include "proto/extra_headers.hpp"
#include "proto/retry_policy.hpp"
#include "proto/signing.hpp"
#include "proto/target_policy.hpp"
#include "storage/claims.hpp"
#include "storage/outcomes.hpp"

namespace surge::engine {

using http_request = boost::beast::http::request<boost::beast::http::string_body>;

// The rows one request carries: one, or a batch. One inline slot keeps a single send free of
// allocation.
using attempt_rows = boost::container::small_vector<storage::claimed_row, 1>;

// Why the row cannot be sent (a value from the queue that would reach a header unchecked, e.g.
// "unsafe event_type: contains CR/LF", or a stored signature that is not 64 lowercase hex
// characters), or empty when it can. Checked before the attempt takes a
// token, so such a row is dead-lettered before any byte is sent.
std::string delivery_refusal(const storage::claimed_row& row);

// The part of a delivery request every row of a subscriber shares: the request line, Host,
// User-Agent and Content-Type application/json. Built once per target and user agent and kept
// (subscriber_state), so a request repeats none of its checks or formatting. Throws
// std::invalid_argument if the request target or a value is unsafe (parse_target_url and the
// user agent's check at start-up keep that from happening).
// The subscriber's extra headers follow Content-Type; their names must pass
// proto::extra_header_name_problem (checked again here: std::invalid_argument otherwise).
std::string request_head(const proto::target& target, std::string_view user_agent,
                         std::span<const proto::header_field> extra_headers = {});

// One row's whole request into `out`, cleared first and its capacity kept, so that with a reused
// buffer a steady stream of deliveries allocates nothing (the signature's text lives in
// proto::signed_fields) and goes out in one write each: `head`,
// X-VVV-Event, X-VVV-Delivery-Id, X-VVV-Subscriber, X-VVV-Attempt, the signature headers of the
// subscriber's scheme for this attempt's timestamp (or the row's stored signature, verbatim),
// Content-Length, and the stored payload unchanged. The Standard Webhooks id is "msg_<row id>",
// stable across retries. Throws std::invalid_argument if a value would be unsafe on the wire
// (delivery_refusal keeps such rows from getting here).
void write_delivery_request(std::string& out, std::string_view head, const proto::signer& signer,
                            const storage::claimed_row& row, std::int64_t unix_seconds);

// A built request's bytes as they go on the wire, into `out` (cleared, capacity kept).
void write_request(std::string& out, const http_request& request);

// A batch POST: the body is the JSON array of the rows' payloads in order,
// signed over as a whole; X-VVV-Batch-Size and X-VVV-Delivery-Ids replace X-VVV-Delivery-Id;
// X-VVV-Event lists the distinct event types; X-VVV-Attempt is the highest attempt number among
// the rows. The Standard Webhooks id is proto::batch_message_id, stable when the same rows are
// retried together. Every payload must be a JSON value (proto::is_json_value).
http_request build_batch_request(const proto::target& target, const proto::signer& signer,
                                 std::span<const storage::claimed_row> rows,
                                 std::int64_t unix_seconds, std::string_view user_agent,
                                 std::span<const proto::header_field> extra_headers = {});

// The row a batch's outcome is decided for: the first row, with the highest attempt count among
// them (no row passes the attempt limit) and the latest created_at (a fresh row is not given up
// for an old one's age), so the whole batch gets one decision and one backoff.
storage::claimed_row batch_lead(std::span<const storage::claimed_row> rows);

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
// streak of 429s without a usable Retry-After so far (proto::decide). A refused target never
// comes here: it holds the subscriber instead (shard_core::hold_for_refused_target).
attempt_judgement judge_attempt(const storage::claimed_row& row, std::int64_t subscriber_id,
                                const http_result& result, const attempt_times& times,
                                const proto::retry_policy& policy,
                                std::chrono::seconds retry_after_cap, double unit_random,
                                int unpaid_rate_limits = 0);

// What `lead`'s judgement (judge_attempt on batch_lead) means for one row of its batch of
// `batch_size`: the same kind, delay and error, the row's own fence and attempt count, and an
// attempt record naming the batch.
storage::outcome outcome_in_batch(const storage::outcome& lead,
                                  const storage::claimed_row& lead_row,
                                  const storage::claimed_row& row, std::int64_t batch_size);

// The outcomes an answered attempt's rows take, from its judgement (judge_attempt on the row,
// or on batch_lead for a batch), into `out` (cleared first, its capacity kept, so that a steady
// stream allocates nothing): one row takes it as it is; each row of a batch takes it with its
// own fence and count (outcome_in_batch). A batch refused as too large (413,
// proto::batch_rows_after) is due again at once with no attempt used up, its POST still
// recorded; the rows the partner may take in one batch are returned then, nullopt otherwise.
std::optional<std::int64_t> settle_rows(const storage::outcome& judged,
                                        std::span<const storage::claimed_row> rows, bool batched,
                                        const storage::claimed_row& lead, int status,
                                        double finished_unix, std::vector<storage::outcome>& out);

// A row handed back or closed without an attempt (release, dead-letter, reschedule).
storage::outcome outcome_for(const storage::claimed_row& row, storage::outcome_kind kind);

}  // namespace surge::engine
