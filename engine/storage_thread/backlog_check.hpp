#pragma once
// One periodic check of the backlog, from its count to what follows: the count
// (less the rows this drain quarantined) resets the estimate that stands for
// the backlog between counts; once the shards have settled, the stuck-row sweep
// runs first and the count is taken again without the rows it dead-lettered;
// then, for --until-drained, backlog_watch decides from the count whether the
// drain has ended (said once). Pure state: periodic_reads asks for the count
// and the sweep, which the storage core performs.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "engine/storage_thread/backlog_watch.hpp"

namespace surge::engine {

class backlog_check {
 public:
  using clock = std::chrono::steady_clock;

  // What follows a count.
  enum class then { nothing, sweep, drained };

  backlog_check(clock::duration sweep_interval, std::chrono::milliseconds retry_wait,
                bool until_drained)
      : watch_(sweep_interval, clock::time_point{}),
        sweep_interval_(sweep_interval),
        retry_wait_(retry_wait),
        until_drained_(until_drained) {}

  // The drain starts at `now`: no sweep before the sweep interval unless the
  // shards run dry.
  void begin(clock::time_point now) { watch_ = backlog_watch(sweep_interval_, now); }
  // Claimed rows handed to the shards.
  void handed_out(std::size_t rows) { handed_out_ += static_cast<std::int64_t>(rows); }
  // The backlog between counts, with `finished` rows finished so far; -1 before
  // the first count.
  std::int64_t estimate(std::int64_t finished) const { return estimate_.at(finished); }

  // A check was skipped: outcomes or claims were waiting.
  void interrupted() { watch_.interrupted(); }
  // A count starts with `finished` rows finished so far.
  void counting(std::int64_t finished) {
    recounting_ = false;
    finished_before_ = finished;
  }
  // Whether the count under way is the one again after a sweep.
  bool recounting() const { return recounting_; }
  // The count found `outstanding` rows this drain can still finish
  // (`earliest_in`: seconds until the earliest scheduled row falls due);
  // `shards_idle`: nothing buffered, in flight or in transit (drain_counters).
  then counted(clock::time_point now, std::int64_t outstanding, std::optional<double> earliest_in,
               bool shards_idle, std::int64_t finished);
  void count_failed() {
    recounting_ = false;
    watch_.check_failed();
  }
  // Whether the next check may come at the short interval (backlog_watch::end_may_be_near).
  bool end_may_be_near() const { return watch_.end_may_be_near(); }

  // A drain that never idles sweeps with the subscriber reload, at the sweep's
  // interval: whether that sweep is due at `now` (it then counts as run).
  bool periodic_sweep(clock::time_point now);
  // The sweep ended: whether the count runs again, without the rows it
  // dead-lettered.
  bool swept();
  // The sweep failed: whether it was a check's (whose count then does not run
  // again).
  bool sweep_failed();

 private:
  then after_count(std::int64_t outstanding, std::optional<double> earliest_in);

  backlog_watch watch_;
  backlog_estimate estimate_;
  clock::duration sweep_interval_;
  std::chrono::milliseconds retry_wait_;
  bool until_drained_;
  std::int64_t handed_out_ = 0;
  std::int64_t finished_before_ = 0;
  bool recounting_ = false;
  bool sweep_for_count_ = false;
  bool drained_said_ = false;
};

}  // namespace surge::engine
