// What a shard publishes of its subscribers (engine/shard/shard_view.hpp).
#include "engine/shard/shard_view.hpp"

#include <algorithm>
#include <string>

namespace surge::engine {

std::optional<held_subscriber> hold_of(const subscriber_state& sub,
                                       std::chrono::steady_clock::time_point now, double now_unix) {
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

void describe_subscribers(std::span<subscriber_state* const> subscribers,
                          std::chrono::steady_clock::time_point now,
                          std::chrono::system_clock::time_point wall,
                          drain_metrics::shard_view& view) {
  const double now_unix = std::chrono::duration<double>(wall.time_since_epoch()).count();
  // Every subscriber, not only the busiest: the partner view's ETA needs the pace of each one
  // with rows queued, even before its first claim.
  view.subscribers.reserve(subscribers.size());
  for (auto* sub : subscribers) {
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
         .announced = sub->limits.announced(wall),
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
}

}  // namespace surge::engine
