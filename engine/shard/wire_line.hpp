#pragma once
// The attempts of one subscriber that are ready to write, first come first served at its wire
// gate (engine/limits/wire_gate.hpp): the one place where the partner's limit decides whether a
// request goes on the wire now. Sans-I/O: the shard's core passes the gate and the clock, and
// carries each verdict to the attempt waiting for it.
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>

#include "engine/limits/token_bucket.hpp"
#include "engine/limits/wire_gate.hpp"

namespace surge::engine {

class wire_line {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  // An attempt with its connection open, ready to write. It gives up (writes nothing, its rows
  // go back) rather than write after `give_up_at`, when its lease would run out first.
  struct writer {
    std::uint32_t attempt = 0;
    time_point give_up_at{};
    bool fresh_connection = false;
  };

  // What the line is judged against: the subscriber's gate, the bucket that admits its attempts
  // (kept no fuller than what the gate lets pass after a wait: after_wire_wait), a Retry-After
  // pause, and whether nothing may be written any more (the shard stops, or another drain owns
  // the subscriber now).
  struct gate_view {
    wire_gate& wire;
    token_bucket& admission;
    time_point paused_until{};
    bool closed = false;
  };

  // The answer at once when nobody is ahead and it can be given: true lets the write go (its
  // charge is taken), false gives up. Nullopt: the writer waits in line, and advance() answers
  // it later.
  std::optional<bool> arrive(const writer& w, gate_view gate, time_point now);

  // Answers the writers whose verdict is known at `now`, calling decided(attempt, go) for each,
  // the head in arrival order. Returns when to look again: the head's next token or the end of
  // a pause, or the earliest give-up time behind it; time_point::max() when nobody waits.
  template <class Decided>
  time_point advance(gate_view gate, time_point now, Decided&& decided) {
    auto wake = time_point::max();
    while (!writers_.empty()) {
      const auto head = writers_.front();
      const auto step = head_step(head, gate, now);
      if (step.what == verdict::wait) {
        wake = step.until;
        break;
      }
      writers_.pop_front();
      if (step.what == verdict::pass) after_wire_wait(gate.admission, gate.wire, now);
      decided(head.attempt, step.what == verdict::pass);
    }
    // Those behind the head give up at their own time, not when they reach it.
    for (auto it = writers_.begin(); it != writers_.end();) {
      if (it != writers_.begin() && (gate.closed || now >= it->give_up_at)) {
        const auto attempt = it->attempt;
        it = writers_.erase(it);
        decided(attempt, false);
        continue;
      }
      if (it != writers_.begin()) wake = std::min(wake, it->give_up_at);
      ++it;
    }
    return wake;
  }

  bool empty() const { return writers_.empty(); }
  std::size_t size() const { return writers_.size(); }

 private:
  enum class verdict { pass, give_up, wait };
  struct step {
    verdict what = verdict::wait;
    time_point until{};
  };
  // The head's answer at `now`: pass (the token is taken), give up, or wait until `until`.
  static step head_step(const writer& w, gate_view gate, time_point now);

  std::deque<writer> writers_;
};

}  // namespace surge::engine
