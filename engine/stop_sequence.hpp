#pragma once
// How a drain stops (sans-I/O): a stop request begins it; attempts in flight get the grace
// period, the last outcome writes get the final write window after it, and whatever the
// database has not taken by then is left to the leases. A second stop signal exits at once,
// unless it is the first one delivered twice. The caller performs each action and arms one
// timer at next_deadline().
#include <chrono>
#include <optional>

namespace surge::engine {

struct stop_timing {
  std::chrono::milliseconds grace{10'000};              // attempts in flight may finish
  std::chrono::milliseconds final_write_window{1'000};  // then the last writes may
  // Two stop signals closer together than this are one request delivered twice (`timeout` and
  // other supervisors signal the child and then its process group within microseconds); a
  // person pressing Ctrl-C again takes longer than this.
  std::chrono::milliseconds repeated_signal_window{500};
};

class stop_sequence {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  enum class action {
    none,
    begin_stop,        // stop claiming, let the shards finish what they hold
    abandon_attempts,  // the grace period is over: attempts still in flight are given up
    abandon_writes,    // the final write window is over: unwritten outcomes stay leased
    ignore_repeat,     // the same stop signal, delivered twice
    exit_now,          // a second stop signal: leave without finishing
  };

  explicit stop_sequence(stop_timing timing) : timing_(timing) {}

  // A stop asked for by a signal, or by the drain itself (drained, duration, a fatal fault).
  action on_stop(time_point now, bool by_signal) {
    if (phase_ == phase::running) {
      phase_ = phase::finishing_attempts;
      began_ = now;
      deadline_ = now + timing_.grace;
      return action::begin_stop;
    }
    if (!by_signal) return action::none;
    if (now - began_ < timing_.repeated_signal_window) return action::ignore_repeat;
    return action::exit_now;
  }

  // The timer armed at next_deadline() fired (or any time: early calls do nothing).
  action on_timer(time_point now) {
    if (!deadline_ || now < *deadline_) return action::none;
    if (phase_ == phase::finishing_attempts) {
      phase_ = phase::finishing_writes;
      deadline_ = now + timing_.final_write_window;
      return action::abandon_attempts;
    }
    phase_ = phase::given_up;
    deadline_.reset();
    return action::abandon_writes;
  }

  // Everything finished before the deadlines: nothing is left to abandon.
  void finished() { deadline_.reset(); }

  bool stopping() const { return phase_ != phase::running; }
  std::optional<time_point> next_deadline() const { return deadline_; }

 private:
  enum class phase { running, finishing_attempts, finishing_writes, given_up };
  stop_timing timing_;
  phase phase_ = phase::running;
  time_point began_{};
  std::optional<time_point> deadline_;
};

}  // namespace surge::engine
