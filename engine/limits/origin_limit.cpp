#include "engine/limits/origin_limit.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace surge::engine {

origin_limit::origin_limit(origin_limit_config config, time_point now)
    : config_(config),
      limit_(std::max(config.minimum, config.initial)),
      period_start_(now),
      window_start_(now) {}

origin_limit::duration origin_limit::best_latency() const {
  return std::min(best_current_, best_previous_);
}

void origin_limit::on_latency(duration latency, time_point now) {
  if (!enabled()) return;
  if (now - period_start_ >= config_.best_latency_period) {
    best_previous_ = best_current_;
    best_current_ = duration::max();
    period_start_ = now;
  }
  best_current_ = std::min(best_current_, latency);
  window_sum_ += latency;
  ++window_samples_;
  if (now - window_start_ >= config_.window) end_window(now);
}

void origin_limit::end_window(time_point now) {
  using seconds = std::chrono::duration<double>;
  const double average = seconds(window_sum_).count() / window_samples_;
  const double acceptable = config_.latency_tolerance * seconds(best_latency()).count() +
                            seconds(config_.latency_slack).count();
  if (average > acceptable) {
    // Queueing: shrink in proportion, at most by half per window.
    const double factor = std::max(0.5, acceptable / average);
    limit_ = std::max(config_.minimum, static_cast<int>(std::floor(limit_ * factor)));
    slow_start_ = false;
  } else if (blocked_) {
    constexpr int ceiling = 1 << 20;  // far above any in-flight cap; keeps doubling finite
    const int step = slow_start_ ? limit_ : std::max(1, static_cast<int>(limit_ * config_.growth));
    limit_ = std::min(ceiling, limit_ + step);
  }
  window_start_ = now;
  window_sum_ = duration::zero();
  window_samples_ = 0;
  blocked_ = false;
}

namespace {
constexpr auto bucket_width = std::chrono::milliseconds(50);

// The first of the (sorted) buckets at or after `bucket`.
template <typename Buckets>
auto first_from(Buckets& buckets, origin_limit::ticket bucket) {
  return std::lower_bound(
      buckets.begin(), buckets.end(), bucket,
      [](const auto& entry, origin_limit::ticket t) { return entry.first < t; });
}
}  // namespace

origin_limit::ticket origin_limit::on_start(time_point now) {
  const ticket bucket = now.time_since_epoch() / bucket_width;
  // Buckets almost always arrive in order, so the search ends at the back.
  auto found = started_.end();
  while (found != started_.begin() && std::prev(found)->first >= bucket) --found;
  if (found != started_.end() && found->first == bucket) {
    ++found->second;
  } else {
    started_.insert(found, {bucket, 1});
  }
  ++in_flight_;
  return bucket;
}

void origin_limit::on_end(ticket started) {
  const auto found = first_from(started_, started);
  if (found == started_.end() || found->first != started) return;
  if (--found->second == 0) started_.erase(found);
  --in_flight_;
}

origin_limit::duration origin_limit::overdue_after() const {
  const auto best = best_latency();
  if (best == duration::max()) return config_.overdue_unknown;
  const auto scaled = std::chrono::duration_cast<duration>(best * config_.overdue_factor);
  return std::max<duration>(scaled, config_.overdue_floor);
}

int origin_limit::counted_in_flight(time_point now) const {
  // Buckets that started before the threshold (whole buckets, so an attempt counts as overdue
  // up to one bucket late, never early). Only overdue buckets are visited.
  const ticket threshold = (now - overdue_after()).time_since_epoch() / bucket_width;
  int overdue = 0;
  for (auto it = started_.begin(); it != started_.end() && it->first < threshold; ++it) {
    overdue += it->second;
  }
  return in_flight_ - overdue;
}

origin_limit::time_point origin_limit::next_recount_at(time_point now) const {
  const ticket threshold = (now - overdue_after()).time_since_epoch() / bucket_width;
  const auto next = first_from(started_, threshold);
  if (next == started_.end()) return time_point::max();
  // The bucket after it starts is when all of its attempts are overdue.
  return time_point(bucket_width * (next->first + 1)) + overdue_after();
}

}  // namespace surge::engine
