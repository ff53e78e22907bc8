// One attempt in the shard's core, from the wire gate's verdict to its outcome: what the answer
// means (subscriber_response) carried out (pauses, a 410, narrower batches, a freed key), and
// the rows handed back when it could not be sent or its target was refused.
#include "engine/shard/core.hpp"

#include <algorithm>

#include "engine/shard/delivery.hpp"
#include "engine/shard/subscriber_response.hpp"

namespace surge::engine {

std::optional<bool> shard_core::on_write_ready(attempt_id id, bool fresh_connection,
                                               shard_time now) {
  if (!begin_event(now)) return false;
  auto& attempt = attempts_[id];
  auto& sub = *attempt.sub;
  const auto answer = sub.line.arrive(
      {.attempt = id, .give_up_at = attempt.give_up_at, .fresh_connection = fresh_connection},
      gate_of(sub), now_.steady);
  if (!answer) notify_line(sub);  // it waits: the line says when to look again
  end_event();
  return answer;
}

void shard_core::on_response(attempt_id id, const http_result& result, std::string request,
                             shard_time now) {
  if (!begin_event(now)) return;
  request_buffers_.give_back(std::move(request));
  settle_attempt(attempts_[id], result);
  attempts_.close(id);
  end_event();
}

void shard_core::settle_attempt(attempt_state& attempt, const http_result& result) {
  auto& sub = *attempt.sub;
  auto& origin = *attempt.origin;
  const auto& rows = attempt.rows;
  for (const auto& row : rows) rows_.let_go(sub, row);
  if (result.not_sent) {
    if (attempt.probe) sub.breaker.on_probe_unsent(now_.steady);
    // Not written, so no attempt is counted.
    for (const auto& row : rows) rows_.give_back_unsent(sub, row, now_.steady, now_.unix_seconds());
    attempt_ended(attempt);
    return;
  }
  attempt_times times;
  times.started_unix = attempt.started_unix;
  times.now = now_.wall;
  times.finished_unix = std::chrono::duration<double>(times.now.time_since_epoch()).count();
  if (result.error == proto::transport_error::refused_target) {
    hold_for_refused_target(sub, rows, result.detail, times.finished_unix);
    attempt_ended(attempt);
    return;
  }
  sub.refused_target.clear();
  // The endpoint's own latency: answered exchanges, and those that timed out waiting (with their
  // whole wait); connect and TLS time are not in it, so opening connections does not read as
  // queueing.
  const bool waited = result.status != 0 || result.error == proto::transport_error::timeout;
  if (waited && result.exchange_time > steady::duration::zero()) {
    slots_.on_latency(origin, result.exchange_time, attempt.slots, now_.steady);
  }
  const std::span<const storage::claimed_row> sent(rows.data(), rows.size());
  const auto heard = hear_response(
      sub, sent, result, times, now_.steady,
      {.metrics = metrics_, .log = logger_, .retry_after_cap = config_.retry_after_cap});
  if (heard.circuit_opened) rows_.release_ready(sub);
  if (heard.paused_until) {
    pause_subscriber(sub, *heard.paused_until - now_.steady, times.finished_unix,
                     "subscriber paused until its partner's announced quota resets");
  }
  if (heard.gate_changed) notify_line(sub);

  const double unit = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  const auto settled =
      settle_answer(sub, sent, attempt.batched, result, times,
                    {.policy = retry_policy_,
                     .retry_after_cap = config_.retry_after_cap,
                     .pause_release_threshold = config_.scheduler.pause_release_threshold},
                    unit, settled_);
  if (settled.pause) {
    pause_subscriber(sub, *settled.pause, times.finished_unix, "subscriber paused by Retry-After");
  }
  if (settled.deactivate) deactivate(sub);
  if (attempt.batched) {
    counters_.add(counters_.batch_posts);
    counters_.add(counters_.batched_rows, static_cast<std::int64_t>(rows.size()));
  }
  if (settled.batch_fits) narrow_batches(sub, rows.size(), static_cast<int>(*settled.batch_fits));
  for (auto& out : settled_) rows_.settled(std::move(out));
  attempt_ended(attempt);
  if (settled.frees_key) claim_after_key_freed(sub);
}

void shard_core::deactivate(subscriber_state& sub) {
  // Only the rows that got the 410 are dead; the rest wait in the queue, as for any inactive
  // subscriber, until an operator enables it again.
  if (sub.settings.active) {
    warn("subscriber " + std::to_string(sub.settings.id) +
         " answered 410 Gone: deactivated; its other rows stay queued until it is enabled");
    // Its host no longer needs in flight what this subscriber's rate did (as a reload,
    // which sums the active ones, would say).
    if (sub.settings.target) origin_of(sub).rate_sum -= sub.settings.rate;
  }
  sub.settings.active = false;
  sub.gone = true;
  rows_.deactivate(sub.settings.id);
  rows_.release_ready(sub);
  notify_line(sub);
}

void shard_core::narrow_batches(subscriber_state& sub, std::size_t refused_rows, int fits) {
  if (fits < sub.batch_fits) {
    inform("subscriber " + std::to_string(sub.settings.id) + " answered 413 to a batch of " +
           std::to_string(refused_rows) + " rows: its batches are now at most " +
           std::to_string(fits) + " rows");
  }
  sub.batch_fits = std::min(sub.batch_fits, fits);
  sub.settings.batch_rows = std::min(sub.settings.batch_rows, sub.batch_fits);
}

void shard_core::attempt_ended(attempt_state& attempt) {
  auto& sub = *attempt.sub;
  auto& origin = *attempt.origin;
  attempt.rows.clear();
  --sub.in_flight;
  counters_.add(counters_.in_flight, -1);
  notify(sub);
  auto& woken = woken_scratch_;
  woken.clear();
  slots_.end(origin, attempt.slots, now_.steady, woken);
  for (auto* next : woken) notify(*next);
}

void shard_core::pause_subscriber(subscriber_state& sub, steady::duration pause, double now_unix,
                                  const char* reason) {
  sub.limits.pause(now_.steady + pause, reason);
  notify_line(sub);
  demand_.poll_no_earlier(sub, sub.limits.paused_until());
  if (pause >= config_.scheduler.pause_release_threshold) {
    rows_.reschedule_ready(sub, now_unix + std::chrono::duration<double>(pause).count(), reason);
  }
}

void shard_core::hold_for_refused_target(subscriber_state& sub, const attempt_rows& rows,
                                         const std::string& refused, double now_unix) {
  // Nothing was sent: no attempt is counted and no row dies. The subscriber waits as for a
  // pause, its buffered rows back in the queue, until its URL is tried again.
  const auto hold = config_.scheduler.refused_target_hold;
  const auto hold_seconds = std::chrono::duration<double>(hold).count();
  if (sub.refused_target.empty()) {
    counters_.add(counters_.refused_target_holds);
    warn("subscriber " + std::to_string(sub.settings.id) + " held: its URL's host gives " +
         refused +
         ", which the target policy refuses (--allow-private-targets allows it); "
         "its rows stay queued and it is tried again every " +
         std::to_string(static_cast<long long>(hold_seconds)) + " s");
  }
  sub.refused_target = refused;
  const std::string reason = "subscriber held: refused target: " + refused;
  pause_subscriber(sub, hold, now_unix, reason.c_str());
  rows_.retry_unsent({rows.data(), rows.size()}, now_unix + hold_seconds, reason);
}

}  // namespace surge::engine
