#pragma once
// How an adaptive concurrency limit moves, in the spirit of TCP Vegas: once per window, it
// shrinks in proportion when the window's latency said requests queued, and grows when it held
// requests back and they did not queue (doubling per window's time until the first decrease,
// like slow start, then by a fraction). The limits that use it (origin_limit, shard_limit) decide
// what counts as queueing; this is only how the number moves.
#include <chrono>

namespace surge::engine {

struct concurrency_window_config {
  int initial = 8;
  int minimum = 4;
  int ceiling = 1 << 20;                  // far above any in-flight cap; keeps doubling finite
  std::chrono::milliseconds window{100};  // the limit moves at most once per window
  double growth = 0.125;                  // per window after slow start
};

class concurrency_window {
 public:
  using clock = std::chrono::steady_clock;
  using time_point = clock::time_point;

  concurrency_window(const concurrency_window_config& config, time_point now);

  int limit() const { return limit_; }
  // A request could not start because of this limit: growth is only earned under demand.
  void note_blocked() { blocked_ = true; }
  bool over(time_point now) const { return now - start_ >= config_.window; }
  // Ends the window. A factor below 1 says the window's requests queued: the limit is scaled by
  // it, at most halved. Otherwise the limit grows if it held a request back.
  void end(double queueing_factor, time_point now);
  // What counts as queueing was raised: the latest decreases, judged by the old measure, are
  // undone, and the limit doubles again until the next one.
  void resume_slow_start();

 private:
  concurrency_window_config config_;
  int limit_;
  time_point start_;
  bool blocked_ = false;
  bool slow_start_ = true;
  int before_decreases_ = 0;  // the limit before the latest decreases in a row (0: it grew since)
};

}  // namespace surge::engine
