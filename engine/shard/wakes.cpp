#include "engine/shard/wakes.hpp"

namespace surge::engine {

void wake_schedule::arm(subscriber_state& sub, kind which, steady::time_point at) {
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
