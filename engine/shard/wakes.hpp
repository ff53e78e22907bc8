#pragma once
// When a shard's core looks at a subscriber again: its pump and its wire line, queued to run
// before the current event returns, or armed for a time (one heap for the whole shard, so the
// reactor keeps one timer). Sans-I/O: the core passes the clock and runs what comes due.
#include <chrono>
#include <cstdint>
#include <queue>
#include <vector>

#include "engine/shard/subscriber.hpp"

namespace surge::engine {

// `at` rounded up to the next multiple of `grid` (scheduler_config::wake_grid): the wakes due
// within one step of the grid share one. max (nothing armed) and a zero grid leave it as it is.
std::chrono::steady_clock::time_point on_wake_grid(std::chrono::steady_clock::time_point at,
                                                   std::chrono::steady_clock::duration grid);

class wake_schedule {
 public:
  using steady = std::chrono::steady_clock;
  enum class kind : std::uint8_t { pump, line };

  // `grid`: a subscriber whose buckets keep filling for a step past its token (subscriber_limits::
  // refills_while_waiting) is woken on it, a step late at most; the others at their exact times.
  explicit wake_schedule(steady::duration grid = steady::duration::zero()) : grid_(grid) {}

  // Look again before the event returns (once, however often asked).
  void queue_pump(subscriber_state& sub) {
    if (sub.pump_queued) return;
    sub.pump_queued = true;
    pump_queue_.push_back(&sub);
  }
  void queue_line(subscriber_state& sub) {
    if (sub.line_queued || sub.line.empty()) return;
    sub.line_queued = true;
    line_queue_.push_back(&sub);
  }
  // Runs the queued lines, then the queued pumps, until neither queues another (a freed slot
  // wakes the next waiter).
  template <typename RunLine, typename RunPump>
  void run_queued(RunLine&& run_line, RunPump&& run_pump) {
    while (!pump_queue_.empty() || !line_queue_.empty()) {
      for (std::size_t i = 0; i < line_queue_.size(); ++i) {
        line_queue_[i]->line_queued = false;
        run_line(*line_queue_[i]);
      }
      line_queue_.clear();
      for (std::size_t i = 0; i < pump_queue_.size(); ++i) {
        pump_queue_[i]->pump_queued = false;
        run_pump(*pump_queue_[i]);
      }
      pump_queue_.clear();
    }
  }

  // Look again at `at` (max: only when something changes), or on the grid after it.
  void arm(subscriber_state& sub, kind which, steady::time_point at);
  steady::duration grid() const { return grid_; }
  // Queues the pumps and lines whose armed time has come by `now`.
  void queue_due(steady::time_point now);
  // The earliest armed time; max when none is armed.
  steady::time_point next() const {
    return timers_.empty() ? steady::time_point::max() : timers_.top().at;
  }

 private:
  struct timed_wake {
    steady::time_point at;
    subscriber_state* sub;
    kind which;
    bool operator>(const timed_wake& other) const { return at > other.at; }
  };

  steady::duration grid_;
  std::vector<subscriber_state*> pump_queue_;
  std::vector<subscriber_state*> line_queue_;
  // An entry whose subscriber has since re-armed for another time is stale and skipped.
  std::priority_queue<timed_wake, std::vector<timed_wake>, std::greater<>> timers_;
};

}  // namespace surge::engine
