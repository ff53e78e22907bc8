#pragma once
// What an attempt's answer means, in two steps the shard's core carries out:
// - hear_response: what it says of the subscriber. The attempt is counted and timed, the circuit
//   breaker and the adaptive pace hear how the endpoint did, and the partner's announced quota
//   paces what follows; what it has to say goes to the metrics and the log handed in.
// - settle_answer: the outcomes its rows take, and the pause, deactivation or narrower batches
//   the answer asks of the subscriber.
#include <chrono>
#include <optional>
#include <span>
#include <vector>

#include "engine/net/http_result.hpp"
#include "engine/observe/log.hpp"
#include "engine/observe/metrics.hpp"
#include "engine/shard/delivery.hpp"
#include "engine/shard/subscriber.hpp"
#include "proto/retry_policy.hpp"
#include "storage/claims.hpp"
#include "storage/outcomes.hpp"

namespace surge::engine {

struct response_effects {
  bool gate_changed = false;    // the writers waiting at its gate look again
  bool circuit_opened = false;  // its buffered rows go back to the queue while it is down
  // The partner's announced quota is spent: nothing goes until then.
  std::optional<std::chrono::steady_clock::time_point> paused_until;
};

struct response_context {
  drain_metrics& metrics;
  core_log& log;
  std::chrono::seconds retry_after_cap;
};

// `rows`: those the attempt carried; `now`: the monotonic time of `times.now`.
response_effects hear_response(subscriber_state& sub, std::span<const storage::claimed_row> rows,
                               const http_result& result, const attempt_times& times,
                               std::chrono::steady_clock::time_point now,
                               const response_context& context);

struct settled_answer {
  std::optional<std::chrono::milliseconds> pause;  // Retry-After asks the subscriber to wait
  bool deactivate = false;                         // 410 Gone
  // An ordered row finished with nothing else of its subscriber ready: its key's next row is
  // worth a claim at once.
  bool frees_key = false;
  // A batch refused as too large: the rows the partner takes in one batch.
  std::optional<std::int64_t> batch_fits;
};

// What settle_answer needs of the drain's settings.
struct settle_settings {
  const proto::retry_policy& policy;
  std::chrono::seconds retry_after_cap;
  // A pause at least this long gives the subscriber's ready rows back (rescheduled after it).
  std::chrono::milliseconds pause_release_threshold;
};

// The outcomes an answered attempt's rows take, into `out` (settle_rows), and what the answer
// asks of the subscriber. A batch gets one decision, made for its lead, and every row takes it.
// `unit_random` in [0, 1) draws the backoff's jitter. Records the subscriber's last error and
// its streak of unpaid 429s.
settled_answer settle_answer(subscriber_state& sub, std::span<const storage::claimed_row> rows,
                             bool batched, const http_result& result, const attempt_times& times,
                             const settle_settings& settings, double unit_random,
                             std::vector<storage::outcome>& out);

}  // namespace surge::engine
