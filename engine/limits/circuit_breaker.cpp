#include "engine/limits/circuit_breaker.hpp"

#include <algorithm>

namespace surge::engine {

bool circuit_breaker::try_admit(time_point now) {
  switch (state_) {
    case state::closed: return true;
    case state::probing: return false;
    case state::open:
      if (now < open_until_) return false;
      state_ = state::probing;
      return true;
  }
  return false;
}

void circuit_breaker::open(time_point now) {
  state_ = state::open;
  open_until_ = now + cooldown_;
}

void circuit_breaker::on_failure(time_point now) {
  switch (state_) {
    case state::closed:
      if (++consecutive_failures_ >= config_.failure_threshold) {
        cooldown_ = config_.base_cooldown;
        opened_at_ = now;
        open(now);
      }
      return;
    case state::probing:
      cooldown_ = std::min(config_.max_cooldown, cooldown_ * 2);
      open(now);
      return;
    case state::open: return;  // a request from before the circuit opened
  }
}

void circuit_breaker::on_probe_unsent(time_point now) {
  if (state_ != state::probing) return;
  state_ = state::open;
  open_until_ = now;
}

void circuit_breaker::on_success() {
  // Only the probe's answer closes an open circuit; a late success from before it opened says
  // little about the endpoint now.
  if (state_ == state::open) return;
  state_ = state::closed;
  consecutive_failures_ = 0;
  cooldown_ = std::chrono::milliseconds(0);
}

}  // namespace surge::engine
