// The core's events, its timers and queued looks, subscriber reloads, stop and finish, and the
// outcomes it batches for the storage thread. Attempts are in attempt.cpp, claims in demand.cpp,
// the pump in pump.cpp, the slots it waits for in slots.cpp.
#include "engine/shard/core.hpp"

#include <algorithm>
#include <cmath>

namespace surge::engine {

shard_core::shard_core(int index, int shard_count, const drain_config& config,
                       drain_metrics& metrics, core_log& logger, std::uint64_t seed, shard_time now)
    : index_(index),
      shard_count_(shard_count),
      config_(config),
      retry_policy_(config.retry),
      row_checks_{
          .max_payload_bytes = config.scheduler.max_payload_bytes,
          .lease_margin =
              std::chrono::duration<double>(config.http.attempt_timeout) + std::chrono::seconds(1),
          // The seed001 shape's workers give a row up after its retry window.
          .retry_window_seconds =
              config.storage.shape == storage::queue_shape::seed001
                  ? std::optional(std::chrono::duration<double>(config.retry.max_age).count())
                  : std::nullopt},
      metrics_(metrics),
      counters_(metrics.counters),
      logger_(logger),
      now_(now),
      demand_(config.scheduler, subscribers_),
      slots_(config.scheduler, std::max(1, config.scheduler.max_in_flight / shard_count),
             now.steady),
      // The first demand goes at once: the first claims are what the first sends wait for.
      next_demand_at_(now.steady),
      next_flush_at_(now.steady + config.scheduler.outcome_flush_interval),
      next_publish_at_(now.steady),
      memory_(static_cast<double>(config.scheduler.max_payload_memory) / shard_count,
              config.scheduler.max_payload_bytes),
      rng_(seed) {}

void shard_core::clear_actions() {
  out_.claim.clear();
  out_.writes.clear();
  out_.sends.clear();
  out_.verdicts.clear();
  out_.quotas.clear();
  out_.evict_idle = false;
}

void shard_core::end_event() {
  wakes_.run_queued([this](subscriber_state& sub) { run_line(sub); },
                    [this](subscriber_state& sub) { run_pump(sub); });
  finish_if_quiet();
}

void shard_core::run_line(subscriber_state& sub) {
  const auto wake = sub.line.advance(gate_of(sub), now_.steady, [this](attempt_id id, bool go) {
    out_.verdicts.push_back({id, go});
  });
  wakes_.arm(sub, wake_schedule::kind::line, wake);
}

shard_core::steady::time_point shard_core::next_wake() const {
  if (finished_) return steady::time_point::max();
  auto at = std::min(next_flush_at_, next_publish_at_);
  if (!stopping_) at = std::min(at, next_demand_at_);
  at = std::min(at, wakes_.next());
  return at;
}

void shard_core::on_timer(shard_time now) {
  if (!begin_event(now)) return;
  wakes_.queue_due(now_.steady);
  if (!stopping_ && now_.steady >= next_demand_at_) {
    next_demand_at_ = now_.steady + config_.scheduler.demand_interval;
    send_demand();
  }
  if (now_.steady >= next_flush_at_) {
    next_flush_at_ = now_.steady + config_.scheduler.outcome_flush_interval;
    flush_outcomes();
    metrics_.beat_shard(static_cast<std::size_t>(index_), now_.steady);
    out_.evict_idle = true;
  }
  if (now_.steady >= next_publish_at_) {
    next_publish_at_ = now_.steady + std::chrono::seconds(1);
    publish_metrics();
  }
  end_event();
}

void shard_core::on_subscribers(std::vector<storage::subscriber_row> rows,
                                std::vector<identity_lookup> identities, shard_time now) {
  if (!begin_event(now)) return;
  update_subscribers(std::move(rows), std::move(identities));
  end_event();
}

void shard_core::begin_stop(shard_time now) {
  if (!begin_event(now)) return;
  if (!stopping_) {
    stopping_ = true;
    for (auto* sub : demand_.scan_order()) {
      release_ready(*sub);
      notify_line(*sub);  // attempts not yet written give their rows back
    }
  }
  end_event();
}

void shard_core::abandon(shard_time now) {
  if (!begin_event(now)) return;
  if (in_flight() > 0) {
    warn("shard " + std::to_string(index_) + ": " + std::to_string(in_flight()) +
         " attempts still in flight after the grace period; their leases will expire");
  }
  finish();
}

void shard_core::update_subscribers(std::vector<storage::subscriber_row> rows,
                                    std::vector<identity_lookup> identities) {
  const double now_unix = now_.unix_seconds();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    auto& row = rows[i];
    auto settings = derive_settings(row, config_.scheduler);
    if (settings.credentials_problem.empty() && i < identities.size()) {
      settings.identity = std::move(identities[i].identity);
      settings.credentials_problem = std::move(identities[i].problem);
    }
    // Held, not failed: without what the partner requires every attempt would be refused.
    if (!settings.credentials_problem.empty()) settings.rate = 0;
    // Unusable limits pause the subscriber (derive_settings): the bucket and everything else
    // that reads the row's limits below see the pause, not the bad values.
    row.rate_per_sec = settings.rate;
    row.burst = static_cast<std::int64_t>(settings.burst);
    auto it = subscribers_.find(row.id);
    // Once per subscriber and value: reloads every few seconds must not repeat it.
    const auto said_once = [this, &row](const std::string& before, const std::string& now,
                                        const char* usable_again, const char* held) {
      if (now == before) return;
      const std::string who = "subscriber " + std::to_string(row.id) + ": ";
      if (now.empty()) {
        inform(who + usable_again);
      } else {
        warn(who + now + held);
      }
    };
    const bool known = it != subscribers_.end();
    said_once(known ? it->second->settings.limits_problem : std::string(), settings.limits_problem,
              "rate and burst are usable again; sending resumes",
              "; treated as paused: its rows stay queued and --until-drained does not wait for "
              "them");
    said_once(known ? it->second->settings.credentials_problem : std::string(),
              settings.credentials_problem, "its credentials are usable again; sending resumes",
              "; held: its rows stay queued and --until-drained does not wait for them");
    const std::string& relief_before =
        it == subscribers_.end() ? std::string() : it->second->settings.relief_problem;
    if (settings.relief_problem != relief_before && !settings.relief_problem.empty()) {
      warn("subscriber " + std::to_string(row.id) + ": " + settings.relief_problem);
    }
    if (it == subscribers_.end()) {
      auto state = std::make_unique<subscriber_state>(row, std::move(settings), now_.steady,
                                                      now_unix, config_.scheduler);
      auto& sub = *state;
      demand_.add(sub);
      subscribers_.emplace(row.id, std::move(state));
      if (!stopping_) notify(sub);
    } else {
      auto& sub = *it->second;
      // Queued behind another origin now: let the pump find its new one.
      const bool moved = settings.target && sub.settings.target &&
                         settings.target->origin_key != sub.settings.target->origin_key;
      if (moved) sub.waiting_on_origin = nullptr;
      settings.batch_rows = std::min(settings.batch_rows, sub.batch_fits);
      sub.settings = std::move(settings);
      // New limits take effect without resetting tokens; a pace lowered by pushback or by the
      // partner's announced quota stays lowered, within the new limit.
      sub.limits.configure(sub.settings.rate, sub.settings.burst, now_.steady);
      notify_line(sub);
      notify(sub);
    }
  }
  slots_.recount_rates(subscribers_, now_.steady);
}

void shard_core::dead_letter(subscriber_state& sub, storage::claimed_row row, std::string reason) {
  adjust_buffered(-1);
  let_go(sub, row);
  counters_.add(counters_.dead);
  auto out = outcome_for(row, storage::outcome_kind::dead);
  out.last_error = std::move(reason);
  out.finished_at = now_.unix_seconds();
  push_outcome(std::move(out));
}

void shard_core::release_ready(subscriber_state& sub) {
  for (auto& row : sub.ready) {
    adjust_buffered(-1);
    let_go(sub, row);
    counters_.add(counters_.released);
    push_outcome(outcome_for(row, storage::outcome_kind::release));
  }
  sub.ready.clear();
}

void shard_core::reschedule_ready(subscriber_state& sub, double next_attempt_at,
                                  std::string reason) {
  for (auto& row : sub.ready) {
    adjust_buffered(-1);
    let_go(sub, row);
    auto out = outcome_for(row, storage::outcome_kind::retry);
    out.next_attempt_at = next_attempt_at;
    out.last_error = reason;
    push_outcome(std::move(out));
  }
  sub.ready.clear();
}

void shard_core::adjust_buffered(int delta) {
  buffered_ += delta;
  counters_.add(counters_.buffered, delta);
}

void shard_core::push_outcome(storage::outcome outcome) {
  outcomes_.push_back(std::move(outcome));
  if (outcomes_.size() >= config_.scheduler.outcome_flush_rows) flush_outcomes();
}

void shard_core::flush_outcomes() {
  if (outcomes_.empty() && deactivate_.empty()) return;
  const auto rows = outcomes_.size();
  out_.writes.push_back({std::exchange(outcomes_, {}), std::exchange(deactivate_, {})});
  // The vector goes to the storage thread; the next batch is likely as large, and growing it
  // one doubling at a time would cost a malloc per doubling.
  outcomes_.reserve(rows);
}

std::optional<held_subscriber> shard_core::hold_of(const subscriber_state& sub,
                                                   steady::time_point now, double now_unix) {
  const auto id = sub.settings.id;
  if (!sub.refused_target.empty()) {
    return held_subscriber{id, "refused_target", "refused target: " + sub.refused_target};
  }
  if (!sub.settings.credentials_problem.empty()) {
    return held_subscriber{id, "credentials", sub.settings.credentials_problem};
  }
  if (sub.gone && !sub.settings.active) {
    return held_subscriber{id, "deactivated",
                           "answered 410 Gone: deactivated (surge subscriber enable " +
                               std::to_string(id) + " sends to it again)"};
  }
  if (sub.breaker.persistently_open()) {
    return held_subscriber{id, "circuit_open",
                           "circuit open: its endpoint failed probe after probe"};
  }
  if (sub.limits.paused(now)) {
    const double until =
        now_unix + std::chrono::duration<double>(sub.limits.paused_until() - now).count();
    return held_subscriber{id, "paused", sub.limits.pause_reason(), until};
  }
  return std::nullopt;
}

void shard_core::publish_metrics() {
  drain_metrics::shard_view view;
  const auto now = now_.steady;
  view.in_flight_limit = slots_.in_flight_limit();
  const double now_unix = now_.unix_seconds();
  // Every subscriber, not only the busiest: the partner view's ETA needs the pace of each one
  // with rows queued, even before its first claim.
  view.subscribers.reserve(subscribers_.size());
  for (auto* sub : demand_.scan_order()) {
    if (sub->limits.paused(now)) ++view.paused_subscribers;
    if (sub->limits.announced_until() > now) ++view.quota_paced;
    if (sub->consecutive_failures > 0) ++view.failing_subscribers;
    if (sub->breaker.blocking()) ++view.open_circuits;
    if (auto held = hold_of(*sub, now, now_unix)) view.held.push_back(std::move(*held));
    sub->achieved.sample(sub->delivered, now_unix);
    std::optional<double> open_since;
    if (sub->breaker.blocking()) {
      open_since = now_unix - std::chrono::duration<double>(now - sub->breaker.opened_at()).count();
    }
    view.subscribers.push_back(
        {.id = sub->settings.id,
         .delivered = sub->delivered,
         .failed = sub->failed_attempts,
         .in_flight = sub->in_flight,
         .buffered = static_cast<std::int64_t>(sub->ready.size()),
         .rate_limit = sub->settings.rate,
         .paused = sub->limits.paused(now),
         .delivery_latency_sum = sub->delivery_latency_sum,
         .announced = sub->limits.announced(now_.wall),
         .active = sub->settings.active,
         .disowned = sub->disowned,
         .paced_rate = sub->limits.paused(now) ? 0.0 : sub->limits.bucket().rate(),
         .rows_per_request = std::max(1, std::min(sub->settings.batch_rows, sub->batch_fits)),
         .slowed = sub->limits.slowed(),
         .achieved_rate = sub->achieved.value(),
         .circuit_open_since_unix = open_since,
         .last_error = sub->last_error,
         .last_error_unix = sub->last_error_unix});
  }
  view.origins = slots_.snapshots(demand_.scan_order(), now);
  metrics_.publish(static_cast<std::size_t>(index_), std::move(view));
  hand_over_quotas();
}

void shard_core::hand_over_quotas() {
  for (auto* sub : demand_.scan_order()) {
    if (auto row = sub->limits.take_unrecorded(sub->settings.id)) {
      out_.quotas.push_back(std::move(*row));
    }
  }
}

void shard_core::finish_if_quiet() {
  // A claim answer still on its way may carry leased rows; finishing before it arrives would
  // leave them leased until the lease runs out, so a stopping shard waits for it too.
  if (stopping_ && in_flight() == 0 && !demand_.outstanding()) finish();
}

void shard_core::finish() {
  if (finished_) return;
  flush_outcomes();
  // The exit summary's held: and left: lines read this last word on each partner, not one up
  // to a second old; it hands over the partners' quotas too, before the unspent tokens (the
  // storage thread ends once it has those).
  publish_metrics();
  // Leased tokens not spent go back to the persisted buckets, for whichever drainer comes next.
  std::vector<storage::unspent_tokens> unspent;
  for (auto* sub : demand_.scan_order()) {
    unspent.push_back(
        {.subscriber_id = sub->settings.id, .tokens = sub->limits.allowance().take_unspent()});
  }
  out_.unspent = std::move(unspent);
  finished_ = true;
}

}  // namespace surge::engine
