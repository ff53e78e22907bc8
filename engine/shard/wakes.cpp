#include "engine/shard/wakes.hpp"

namespace surge::engine {

std::chrono::steady_clock::time_point on_wake_grid(std::chrono::steady_clock::time_point at,
                                                   std::chrono::steady_clock::duration grid) {
  using steady = std::chrono::steady_clock;
  if (grid <= steady::duration::zero() || at == steady::time_point::max()) return at;
  const auto since_epoch = at.time_since_epoch();
  const auto past_step = since_epoch % grid;
  if (past_step == steady::duration::zero()) return at;
  if (at > steady::time_point::max() - (grid - past_step)) return steady::time_point::max();
  return at + (grid - past_step);
}

void wake_schedule::arm(subscriber_state& sub, kind which, steady::time_point at) {
  if (sub.limits.refills_while_waiting(grid_)) at = on_wake_grid(at, grid_);
  auto& armed = which == kind::pump ? sub.pump_at : sub.line_at;
  // A wake already armed no later is kept: waking early only looks again and re-arms, while
  // re-arming for every small shift of a token's time (each grant, reload or answer recomputes
  // it) would leave a stale entry in the heap each time.
  if (armed <= at) return;
  armed = at;
  if (at != steady::time_point::max()) timers_.push({at, &sub, which});
}

void wake_schedule::queue_due(steady::time_point now) {
  while (!timers_.empty() && timers_.top().at <= now) {
    const auto wake = timers_.top();
    timers_.pop();
    auto& sub = *wake.sub;
    auto& armed = wake.which == kind::pump ? sub.pump_at : sub.line_at;
    if (armed != wake.at) continue;  // re-armed since
    armed = steady::time_point::max();
    if (wake.which == kind::pump) {
      queue_pump(sub);
    } else {
      queue_line(sub);
    }
  }
}

}  // namespace surge::engine
