// The core's events, its timer and queued looks, subscriber reloads, what it publishes, stop and
// finish. Attempts are in attempt.cpp, claims in demand.cpp.
#include "engine/shard/core.hpp"

#include "engine/shard/shard_view.hpp"

#include <algorithm>
#include <cmath>

namespace surge::engine {

shard_core::shard_core(int index, int shard_count, const drain_config& config,
                       drain_metrics& metrics, core_log& logger, std::uint64_t seed, shard_time now)
    : index_(index),
      config_(config),
      metrics_(metrics),
      counters_(metrics.counters),
      logger_(logger),
      now_(now),
      rows_(config.scheduler, shard_count, metrics.counters, out_.writes),
      demand_(config.scheduler, subscribers_),
      slots_(config.scheduler, std::max(1, config.scheduler.max_in_flight / shard_count),
             now.steady),
      wakes_(config.scheduler.wake_grid),
      settlement_({.retry = proto::retry_policy(config.retry),
                   .retry_after_cap = config.retry_after_cap,
                   .pause_release_threshold = config.scheduler.pause_release_threshold,
                   .refused_target_hold = config.scheduler.refused_target_hold,
                   .out_of_descriptors_wait = config.scheduler.out_of_descriptors_wait},
                  {.rows = rows_,
                   .slots = slots_,
                   .demand = demand_,
                   .wakes = wakes_,
                   .metrics = metrics,
                   .log = logger},
                  seed),
      pump_({.checks = {.max_payload_bytes = config.scheduler.max_payload_bytes,
                        .lease_margin = std::chrono::duration<double>(config.http.attempt_timeout) +
                                        std::chrono::seconds(1),
                        // The seed001 shape's workers give a row up after its retry window.
                        .retry_window_seconds =
                            config.storage.shape == storage::queue_shape::seed001
                                ? std::optional(
                                      std::chrono::duration<double>(config.retry.max_age).count())
                                : std::nullopt},
             .user_agent = config.http.user_agent},
            {.rows = rows_,
             .slots = slots_,
             .wakes = wakes_,
             .attempts = attempts_,
             .sends = out_.sends,
             .metrics = metrics},
            [this](attempt_state& attempt, const http_result& result) {
              settle_attempt(attempt, result);
            }),
      // The first demand goes at once: the first claims are what the first sends wait for.
      next_demand_at_(now.steady),
      next_flush_at_(now.steady + config.scheduler.outcome_flush_interval),
      next_publish_at_(now.steady) {}

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
                    [this](subscriber_state& sub) { pump_.run(sub, now_, stopping_); });
  finish_if_quiet();
}

void shard_core::run_line(subscriber_state& sub) {
  const auto wake = sub.line.advance(gate_of(sub), now_.steady, [this](attempt_id id, bool go) {
    judged_at_gate(id, go);
    out_.verdicts.push_back({id, go});
  });
  wakes_.arm(sub, wake_schedule::kind::line, wake);
}

shard_core::steady::time_point shard_core::next_wake() const {
  if (finished_) return steady::time_point::max();
  auto at = std::min(next_flush_at_, next_publish_at_);
  if (!stopping_) at = std::min(at, next_demand_at_);
  // The shard's own rounds may come a grid step late; the subscribers' wakes are armed on it
  // where that costs nothing (wake_schedule::arm).
  return std::min(on_wake_grid(at, wakes_.grid()), wakes_.next());
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
    rows_.flush();
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
      rows_.release_ready(*sub);
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
    auto it = subscribers_.find(row.id);
    const bool known = it != subscribers_.end();
    auto settings =
        reloaded_settings(row, i < identities.size() ? std::move(identities[i]) : identity_lookup{},
                          known ? &it->second->settings : nullptr, config_.scheduler, logger_);
    if (!known) {
      auto state = std::make_unique<subscriber_state>(row, std::move(settings), now_.steady,
                                                      now_unix, config_.scheduler);
      auto& sub = *state;
      demand_.add(sub);
      subscribers_.emplace(row.id, std::move(state));
      if (!stopping_) notify(sub);
    } else {
      auto& sub = *it->second;
      sub.reconfigure(std::move(settings), now_.steady);
      notify_line(sub);
      notify(sub);
    }
  }
  slots_.recount_rates(subscribers_, now_.steady);
}

void shard_core::publish_metrics() {
  drain_metrics::shard_view view;
  view.in_flight_limit = slots_.in_flight_limit();
  describe_subscribers(demand_.scan_order(), now_.steady, now_.wall, view);
  view.origins = slots_.snapshots(demand_.scan_order(), now_.steady);
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
  rows_.flush();
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
