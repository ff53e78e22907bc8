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

class wake_schedule {
 public:
  using steady = std::chrono::steady_clock;
  enum class kind : std::uint8_t { pump, line };

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

  // Look again at `at` (max: only when something changes).
  void arm(subscriber_state& sub, kind which, steady::time_point at);
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

  std::vector<subscriber_state*> pump_queue_;
  std::vector<subscriber_state*> line_queue_;
  // An entry whose subscriber has since re-armed for another time is stale and skipped.
  std::priority_queue<timed_wake, std::vector<timed_wake>, std::greater<>> timers_;
};

}  // namespace surge::engine
