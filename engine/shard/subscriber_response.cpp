// What an attempt's answer says of its subscriber (engine/shard/subscriber_response.hpp).
#include "engine/shard/subscriber_response.hpp"

#include <algorithm>
#include <string>

#include "proto/outcome.hpp"
#include "proto/retry_after.hpp"

namespace surge::engine {
namespace {

void count_attempt(subscriber_state& sub, std::span<const storage::claimed_row> rows,
                   const http_result& result, const attempt_times& times, drain_metrics& metrics) {
  auto& counters = metrics.counters;
  counters.add(counters.attempts);
  if (result.fresh_retry) counters.add(counters.fresh_retries);
  metrics.count_attempt(result.status);
  metrics.attempt_duration.observe(times.finished_unix - times.started_unix);
  for (const auto& row : rows) {
    if (row.attempts == 0) {
      metrics.due_lag.observe(std::max(0.0, times.started_unix - row.next_attempt_at));
    }
  }
  if (proto::classify_status(result.status) == proto::status_class::success) {
    sub.delivered += static_cast<std::int64_t>(rows.size());
    for (const auto& row : rows) {
      sub.delivery_latency_sum += std::max(0.0, times.finished_unix - row.created_at);
    }
    sub.consecutive_failures = 0;
  } else {
    ++sub.failed_attempts;
    ++sub.consecutive_failures;
  }
}

// The circuit breaker and the adaptive pace.
void hear_endpoint(subscriber_state& sub, const http_result& result,
                   std::chrono::steady_clock::time_point now, core_log& log,
                   response_effects& effects) {
  const auto reading =
      proto::read_endpoint(result.status, result.error, !result.retry_after.empty());
  if (reading.unwell) {
    const bool was_closed = !sub.breaker.blocking();
    sub.breaker.on_failure(now);
    if (was_closed && sub.breaker.blocking()) {
      log.write(log_level::warn, "subscriber " + std::to_string(sub.settings.id) +
                                     ": circuit open after " +
                                     std::to_string(sub.consecutive_failures) +
                                     " failures; one probe per cool-down");
      // Its buffered rows go back to the queue rather than sit on leases while it is down.
      effects.circuit_opened = true;
    }
  } else if (reading.alive) {
    sub.breaker.on_success();
  }
  if (sub.limits.on_endpoint(reading.pushback, reading.delivered, now)) {
    effects.gate_changed = true;
  }
}

// The partner's announced quota (subscriber_limits::on_announced).
void hear_quota(subscriber_state& sub, const http_result& result, const attempt_times& times,
                std::chrono::steady_clock::time_point now, const response_context& context,
                response_effects& effects) {
  if (result.quota.empty()) return;
  // Retry-After wins where it is honoured (429, 503): the quota only paces what is left of its
  // window after it.
  std::optional<std::chrono::seconds> retry_after;
  if (proto::asks_to_slow_down(result.status) && !result.retry_after.empty()) {
    retry_after = proto::parse_retry_after(result.retry_after, times.now, context.retry_after_cap);
  }
  // This attempt still counts in in_flight: the others are what the partner may not have seen.
  const auto step =
      sub.limits.on_announced(result.quota, sub.in_flight - 1, retry_after, times.now, now);
  if (!step) return;
  if (step->kind == proto::pace_kind::paused) effects.paused_until = step->until;
  if (step->first_below_configured) {
    const auto& latest = *sub.limits.latest_announcement();
    context.log.write(log_level::info,
                      "subscriber " + std::to_string(sub.settings.id) + ": its partner announces " +
                          std::to_string(latest.remaining) + " requests left for " +
                          std::to_string(latest.reset_after.count()) +
                          " s; paced below the configured limit until its window resets "
                          "(surge stats shows the latest)");
  }
  if (step->gate_changed) effects.gate_changed = true;
}

}  // namespace

response_effects hear_response(subscriber_state& sub, std::span<const storage::claimed_row> rows,
                               const http_result& result, const attempt_times& times,
                               std::chrono::steady_clock::time_point now,
                               const response_context& context) {
  response_effects effects;
  count_attempt(sub, rows, result, times, context.metrics);
  hear_endpoint(sub, result, now, context.log, effects);
  hear_quota(sub, result, times, now, context, effects);
  return effects;
}

settled_answer settle_answer(subscriber_state& sub, std::span<const storage::claimed_row> rows,
                             bool batched, const http_result& result, const attempt_times& times,
                             const settle_settings& settings, double unit_random,
                             std::vector<storage::outcome>& out) {
  const auto lead = batched ? batch_lead(rows) : storage::claimed_row{};
  const auto& judged_row = batched ? lead : rows.front();
  auto judged = judge_attempt(judged_row, sub.settings.id, result, times, settings.policy,
                              settings.retry_after_cap, unit_random, sub.unpaid_rate_limits);
  sub.unpaid_rate_limits = judged.unpaid_rate_limits;
  if (!judged.outcome.last_error.empty()) {
    sub.last_error = judged.outcome.last_error;
    sub.last_error_unix = times.finished_unix;
  }
  settled_answer settled;
  settled.pause = judged.pause_subscriber;
  settled.deactivate = judged.deactivate_subscriber;
  // An ordered key's next row is claimable once this row's finish is written (a retry keeps
  // the key where it is). Hurried only when the subscriber has nothing else buffered to send,
  // as with one hot key: with many keys, other keys' rows are ready, and the finish rides the
  // usual commit cadence and batched hand-off. A deactivated subscriber's ready rows go back, and
  // so do a long pause's (a row that dies may still pause its subscriber).
  const bool ready_rows_go_back =
      settled.deactivate || (settled.pause && *settled.pause >= settings.pause_release_threshold);
  const bool others_ready = !sub.ready.empty() && !ready_rows_go_back;
  judged.outcome.frees_key = sub.settings.order.has_value() &&
                             judged.outcome.kind != storage::outcome_kind::retry && !others_ready;
  settled.batch_fits =
      settle_rows(judged.outcome, rows, batched, lead, result.status, times.finished_unix, out);
  // A refused batch's rows are all due again: none of them freed its key.
  settled.frees_key = judged.outcome.frees_key && !settled.batch_fits;
  return settled;
}

}  // namespace surge::engine
