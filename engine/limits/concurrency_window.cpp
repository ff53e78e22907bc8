#include "engine/limits/concurrency_window.hpp"

#include <algorithm>
#include <cmath>

namespace surge::engine {

concurrency_window::concurrency_window(const concurrency_window_config& config, time_point now)
    : config_(config),
      limit_(std::clamp(config.initial, config.minimum, std::max(config.minimum, config.ceiling))),
      start_(now) {}

void concurrency_window::end(double queueing_factor, time_point now) {
  if (queueing_factor < 1) {
    const double factor = std::max(0.5, queueing_factor);
    if (before_decreases_ == 0) before_decreases_ = limit_;
    limit_ = std::max(config_.minimum, static_cast<int>(std::floor(limit_ * factor)));
    slow_start_ = false;
  } else if (blocked_) {
    double grown = limit_ + std::max(1.0, limit_ * config_.growth);
    if (slow_start_) {
      // Doubling per window of time, not per window closed: a window closes on an answer, so
      // with partners 200 ms away it lasts two windows' time, and doubling per answer would take
      // six round trips (1.2 s) to reach the thousand requests 5,000/s of their limits need.
      // At most three doublings at once, so an idle spell does not read as many windows.
      const double windows = std::chrono::duration<double>(now - start_) / config_.window;
      grown = limit_ * std::exp2(std::clamp(std::floor(windows), 1.0, 3.0));
    }
    limit_ = std::max(config_.minimum,
                      static_cast<int>(std::min<double>(config_.ceiling, std::floor(grown))));
    before_decreases_ = 0;
  }
  start_ = now;
  blocked_ = false;
}

void concurrency_window::resume_slow_start() {
  limit_ = std::max(limit_, before_decreases_);
  before_decreases_ = 0;
  slow_start_ = true;
}

}  // namespace surge::engine
