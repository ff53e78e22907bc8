#include "engine/shard/settlement.hpp"

#include <algorithm>
#include <span>
#include <utility>

#include "engine/shard/delivery.hpp"
#include "engine/shard/subscriber_response.hpp"

namespace surge::engine {

attempt_settlement::attempt_settlement(settlement_config config, settlement_machines machines,
                                       std::uint64_t seed)
    : config_(std::move(config)), on_(machines), counters_(machines.metrics.counters), rng_(seed) {}

bool attempt_settlement::settle(attempt_state& attempt, const http_result& result, shard_time now) {
  auto& sub = *attempt.sub;
  auto& origin = *attempt.origin;
  const auto& rows = attempt.rows;
  for (const auto& row : rows) on_.rows.let_go(sub, row);
  if (result.not_sent) {
    if (attempt.probe) sub.breaker.on_probe_unsent(now.steady);
    // Not written, so no attempt is counted.
    for (const auto& row : rows)
      on_.rows.give_back_unsent(sub, row, now.steady, now.unix_seconds());
    return false;
  }
  attempt_times times;
  times.started_unix = attempt.started_unix;
  times.now = now.wall;
  times.finished_unix = now.unix_seconds();
  if (result.error == proto::transport_error::refused_target) {
    hold_for_refused_target(sub, rows, result.detail, now.steady, times.finished_unix);
    return false;
  }
  if (result.out_of_descriptors) {
    retry_without_descriptors(attempt, result.detail, now.steady, times.finished_unix);
    return false;
  }
  sub.refused_target.clear();
  // The endpoint's own latency: answered exchanges, and those that timed out waiting (with their
  // whole wait); connect and TLS time are not in it, so opening connections does not read as
  // queueing.
  const bool waited = result.status != 0 || result.error == proto::transport_error::timeout;
  if (waited && result.exchange_time > steady::duration::zero()) {
    on_.slots.on_latency(origin, result.exchange_time, attempt.slots, now.steady);
  }
  const std::span<const storage::claimed_row> sent(rows.data(), rows.size());
  const auto heard = hear_response(
      sub, sent, result, times, now.steady,
      {.metrics = on_.metrics, .log = on_.log, .retry_after_cap = config_.retry_after_cap});
  if (heard.circuit_opened) on_.rows.release_ready(sub);
  if (heard.paused_until) {
    pause(sub, *heard.paused_until - now.steady, now.steady, times.finished_unix,
          "subscriber paused until its partner's announced quota resets");
  }
  if (heard.gate_changed) on_.wakes.queue_line(sub);

  const double unit = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  const auto settled = settle_answer(sub, sent, attempt.batched, result, times,
                                     {.policy = config_.retry,
                                      .retry_after_cap = config_.retry_after_cap,
                                      .pause_release_threshold = config_.pause_release_threshold},
                                     unit, settled_);
  if (settled.pause) {
    pause(sub, *settled.pause, now.steady, times.finished_unix, "subscriber paused by Retry-After");
  }
  if (settled.deactivate) deactivate(sub, now.steady);
  if (attempt.batched) {
    counters_.add(counters_.batch_posts);
    counters_.add(counters_.batched_rows, static_cast<std::int64_t>(rows.size()));
  }
  if (settled.batch_fits) narrow_batches(sub, rows.size(), static_cast<int>(*settled.batch_fits));
  for (auto& out : settled_) on_.rows.settled(std::move(out));
  return settled.frees_key;
}

void attempt_settlement::deactivate(subscriber_state& sub, steady::time_point now) {
  // Only the rows that got the 410 are dead; the rest wait in the queue, as for any inactive
  // subscriber, until an operator enables it again.
  if (sub.settings.active) {
    on_.log.write(log_level::warn,
                  "subscriber " + std::to_string(sub.settings.id) +
                      " answered 410 Gone: deactivated; its other rows stay queued until it is "
                      "enabled");
    // Its host no longer needs in flight what this subscriber's rate did (as a reload,
    // which sums the active ones, would say).
    if (sub.settings.target) on_.slots.origin_of(sub, now).rate_sum -= sub.settings.rate;
  }
  sub.settings.active = false;
  sub.gone = true;
  on_.rows.deactivate(sub.settings.id);
  on_.rows.release_ready(sub);
  on_.wakes.queue_line(sub);
}

void attempt_settlement::narrow_batches(subscriber_state& sub, std::size_t refused_rows, int fits) {
  if (fits < sub.batch_fits) {
    on_.log.write(log_level::info,
                  "subscriber " + std::to_string(sub.settings.id) + " answered 413 to a batch of " +
                      std::to_string(refused_rows) + " rows: its batches are now at most " +
                      std::to_string(fits) + " rows");
  }
  sub.batch_fits = std::min(sub.batch_fits, fits);
  sub.settings.batch_rows = std::min(sub.settings.batch_rows, sub.batch_fits);
}

void attempt_settlement::pause(subscriber_state& sub, steady::duration pause,
                               steady::time_point now, double now_unix, const char* reason) {
  sub.limits.pause(now + pause, reason);
  on_.wakes.queue_line(sub);
  on_.demand.poll_no_earlier(sub, sub.limits.paused_until());
  if (pause >= config_.pause_release_threshold) {
    on_.rows.reschedule_ready(sub, now_unix + std::chrono::duration<double>(pause).count(), reason);
  }
}

void attempt_settlement::hold_for_refused_target(subscriber_state& sub, const attempt_rows& rows,
                                                 const std::string& refused, steady::time_point now,
                                                 double now_unix) {
  // Nothing was sent: no attempt is counted and no row dies. The subscriber waits as for a
  // pause, its buffered rows back in the queue, until its URL is tried again.
  const auto hold = config_.refused_target_hold;
  const auto hold_seconds = std::chrono::duration<double>(hold).count();
  if (sub.refused_target.empty()) {
    counters_.add(counters_.refused_target_holds);
    on_.log.write(log_level::warn,
                  "subscriber " + std::to_string(sub.settings.id) + " held: its URL's host gives " +
                      refused +
                      ", which the target policy refuses (--allow-private-targets allows it); "
                      "its rows stay queued and it is tried again every " +
                      std::to_string(static_cast<long long>(hold_seconds)) + " s");
  }
  sub.refused_target = refused;
  const std::string reason = "subscriber held: refused target: " + refused;
  pause(sub, hold, now, now_unix, reason.c_str());
  on_.rows.retry_unsent({rows.data(), rows.size()}, now_unix + hold_seconds, reason);
}

void attempt_settlement::retry_without_descriptors(attempt_state& attempt, const std::string& why,
                                                   steady::time_point now, double now_unix) {
  // This process's or the system's limit, not the partner: no attempt is counted, its circuit
  // hears nothing, and the rows go back for a while rather than round the shard at once.
  // Its subscriber waits as long (its other rows stay buffered), so that its next rows do not
  // fail the same way at its full rate meanwhile.
  auto& sub = *attempt.sub;
  if (attempt.probe) sub.breaker.on_probe_unsent(now);
  const auto wait = std::chrono::duration<double>(config_.out_of_descriptors_wait).count();
  pause(sub, config_.out_of_descriptors_wait, now, now_unix, "no file descriptor free");
  on_.rows.retry_unsent({attempt.rows.data(), attempt.rows.size()}, now_unix + wait, why);
  if (last_descriptor_warning_ &&
      now - *last_descriptor_warning_ < config_.out_of_descriptors_warning_interval) {
    return;
  }
  last_descriptor_warning_ = now;
  on_.log.write(log_level::warn, why + "; its rows wait and are tried again, no attempt counted");
}

}  // namespace surge::engine
