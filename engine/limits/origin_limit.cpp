#include "engine/limits/origin_limit.hpp"

#include <algorithm>

namespace surge::engine {

namespace {
concurrency_window_config window_config(const origin_limit_config& config) {
  return {.initial = config.initial,
          .minimum = config.minimum,
          .window = config.window,
          .growth = config.growth};
}
}  // namespace

origin_limit::origin_limit(origin_limit_config config, time_point now)
    : config_(config), window_(window_config(config), now), period_start_(now) {}

origin_limit::duration origin_limit::best_latency() const {
  return std::min(best_current_, best_previous_);
}

origin_limit::duration origin_limit::acceptable_latency() const {
  const auto best = best_latency();
  if (best == duration::max()) return duration::max();
  return std::chrono::duration_cast<duration>(best * config_.latency_tolerance) +
         config_.latency_slack;
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
  if (window_.over(now)) end_window(now);
}

void origin_limit::end_window(time_point now) {
  using seconds = std::chrono::duration<double>;
  // Queueing: shrink in proportion to how far the average is above the acceptable latency.
  const double average = seconds(window_sum_).count() / window_samples_;
  const double acceptable = seconds(acceptable_latency()).count();
  window_.end(average > acceptable ? acceptable / average : 1.0, now);
  window_sum_ = duration::zero();
  window_samples_ = 0;
}

origin_limit::ticket origin_limit::on_start(time_point now) { return started_.add(now); }

void origin_limit::on_end(ticket started) { started_.remove(started); }

origin_limit::duration origin_limit::overdue_after() const {
  const auto best = best_latency();
  if (best == duration::max()) return config_.overdue_unknown;
  const auto scaled = std::chrono::duration_cast<duration>(best * config_.overdue_factor);
  return std::max<duration>(scaled, config_.overdue_floor);
}

int origin_limit::counted_in_flight(time_point now) const {
  // Attempts that started before now - overdue_after are overdue and not counted.
  return started_.count_from(now - overdue_after());
}

origin_limit::time_point origin_limit::next_recount_at(time_point now) const {
  const auto end = started_.first_bucket_end_from(now - overdue_after());
  if (end == time_point::max()) return end;
  // The bucket after it starts is when all of its attempts are overdue.
  return end + overdue_after();
}

}  // namespace surge::engine
