#pragma once
// What an attempt's answer says of its subscriber, apart from its rows' outcomes: the attempt is
// counted and timed, the circuit breaker and the adaptive pace hear how the endpoint did, and
// the partner's announced quota paces what follows. The shard's core carries out what it
// returns; what it has to say goes to the metrics and the log handed in.
#include <chrono>
#include <optional>
#include <span>

#include "engine/net/http_result.hpp"
#include "engine/observe/log.hpp"
#include "engine/observe/metrics.hpp"
#include "engine/shard/delivery.hpp"
#include "engine/shard/subscriber.hpp"
#include "storage/claims.hpp"

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

}  // namespace surge::engine
