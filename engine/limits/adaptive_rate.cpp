#include "engine/limits/adaptive_rate.hpp"

#include <algorithm>

namespace surge::engine {

bool adaptive_rate::on_pushback(time_point now) {
  if (configured_ <= 0) return false;
  if (reduced_ && now - last_decrease_ < config_.decrease_spacing) return false;
  const double floor = configured_ * config_.floor_fraction;
  const double next = std::max(floor, effective_ * config_.decrease_factor);
  last_decrease_ = now;
  last_increase_ = now;
  reduced_ = true;
  if (next == effective_) return false;
  effective_ = next;
  return true;
}

bool adaptive_rate::on_success(time_point now) {
  if (!reduced_) return false;
  const double seconds = std::chrono::duration<double>(now - last_increase_).count();
  // Step at most ten times a second: the bucket is reconfigured on every change.
  if (seconds < 0.1) return false;
  last_increase_ = now;
  effective_ =
      std::min(configured_, effective_ + configured_ * config_.increase_per_second * seconds);
  if (effective_ >= configured_) reduced_ = false;
  return true;
}

void adaptive_rate::reconfigure(double configured) {
  configured_ = configured;
  if (!reduced_ || effective_ > configured_) {
    effective_ = configured_;
    reduced_ = false;
  }
}

}  // namespace surge::engine
