#include "engine/net/connection_need.hpp"

#include <cmath>

namespace surge::engine {

void connection_need::advance(time_point now) {
  if (!started_) {
    started_ = true;
    window_start_ = last_ = now;
    return;
  }
  if (now <= last_) return;
  const auto window_end = window_start_ + config_.window;
  if (now < window_end) {
    current_area_ += static_cast<double>(requests_) * static_cast<double>((now - last_).count());
    last_ = now;
    return;
  }
  current_area_ +=
      static_cast<double>(requests_) * static_cast<double>((window_end - last_).count());
  const auto windows = (now - window_start_) / config_.window;
  // Whole windows passed without an event held what this moment holds.
  previous_area_ = windows == 1 ? current_area_
                                : static_cast<double>(requests_) *
                                      static_cast<double>(clock::duration(config_.window).count());
  window_start_ += windows * config_.window;
  current_area_ =
      static_cast<double>(requests_) * static_cast<double>((now - window_start_).count());
  last_ = now;
  measured_ = true;
}

void connection_need::on_request(time_point now) {
  advance(now);
  ++requests_;
}

void connection_need::on_done(time_point now) {
  advance(now);
  if (requests_ > 0) --requests_;
}

std::optional<int> connection_need::need(time_point now) {
  advance(now);
  if (!measured_) return std::nullopt;
  // The last window: the part of the previous one it still covers and all of the current one.
  const double window = static_cast<double>(clock::duration(config_.window).count());
  const double into_current = static_cast<double>((now - window_start_).count()) / window;
  const double average = (previous_area_ * (1.0 - into_current) + current_area_) / window;
  // Less a hair, so that a product that is whole in decimal is not rounded up by its binary one.
  return static_cast<int>(std::ceil(average * config_.headroom - 1e-9)) + config_.spare;
}

bool connection_need::may_open(int open, int waiting, time_point now) {
  if (config_.max_wait <= std::chrono::milliseconds::zero()) return true;
  if ((waiting + 1) * config_.busy_per_waiting > open) return true;
  const auto needed = need(now);
  return !needed || open < *needed;
}

}  // namespace surge::engine
