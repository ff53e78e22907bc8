#include "engine/limits/shard_limit.hpp"

namespace surge::engine {

shard_limit::shard_limit(const shard_limit_config& config, int ceiling, bool enabled,
                         time_point now)
    : enabled_(enabled),
      window_({.initial = config.initial,
               .minimum = config.minimum,
               .ceiling = ceiling,
               .window = config.window,
               .growth = config.growth},
              now) {}

shard_limit::ticket shard_limit::on_start(time_point now, duration overdue_after) {
  return overdue_at_.add(now + overdue_after);
}

void shard_limit::on_end(ticket filed) { overdue_at_.remove(filed); }

int shard_limit::counted_in_flight(time_point now) const { return overdue_at_.count_from(now); }

shard_limit::time_point shard_limit::next_recount_at(time_point now) const {
  return overdue_at_.first_bucket_end_from(now);
}

void shard_limit::on_latency(duration latency, duration acceptable, time_point now) {
  if (!enabled_) return;
  ++window_samples_;
  if (latency > acceptable) {
    ++window_queued_;
    using seconds = std::chrono::duration<double>;
    queued_factor_sum_ += seconds(acceptable).count() / seconds(latency).count();
  }
  if (window_.over(now)) end_window(now);
}

void shard_limit::end_window(time_point now) {
  // Most of the window's exchanges queued: shrink by how far they were over, on average.
  const bool queued = window_queued_ * 2 > window_samples_;
  window_.end(queued ? queued_factor_sum_ / window_queued_ : 1.0, now);
  window_samples_ = 0;
  window_queued_ = 0;
  queued_factor_sum_ = 0;
}

}  // namespace surge::engine
