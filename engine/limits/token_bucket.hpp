#pragma once
// Per-subscriber token bucket. Sans-I/O: the caller passes monotonic time.
#include <chrono>

namespace surge::engine {

class token_bucket {
 public:
  using clock = std::chrono::steady_clock;
  using time_point = clock::time_point;
  using duration = clock::duration;

  // Capacity is `burst` (at least 1 so that a positive rate can ever send); `initial_tokens` is
  // clamped to [0, capacity]. A rate <= 0 means paused: nothing is taken whatever the tokens.
  token_bucket(double rate_per_sec, double burst, double initial_tokens, time_point now);

  // Takes one token if one is there. A refused take changes nothing.
  bool try_take(time_point now);
  // Zero when a token is there now; duration::max() when paused.
  duration time_until_available(time_point now) const;
  // Tokens there would be at `t` if nothing is taken before, never above capacity.
  double tokens_at(time_point t) const;

  // New limits apply from `now` without resetting tokens (clamped to the new capacity).
  void reconfigure(double rate_per_sec, double burst, time_point now);
  // Used by 429 handling: nothing more goes out until refill.
  void empty(time_point now);
  // No more than `tokens` at `now` (refill continues from there); never adds any.
  void at_most(double tokens, time_point now);

  double rate() const { return rate_; }
  double capacity() const { return capacity_; }
  bool paused() const { return rate_ <= 0; }

 private:
  void refill(time_point now);

  double rate_;
  double capacity_;
  double tokens_;
  time_point updated_;
};

// Seeds a bucket's tokens from the persisted columns, refilled for the wall time elapsed since,
// so a subscriber handed over by the steady-state drainer does not get a second full burst.
double seeded_tokens(double persisted_tokens, double persisted_at_unix, double rate_per_sec,
                     double burst, double now_unix);

}  // namespace surge::engine
