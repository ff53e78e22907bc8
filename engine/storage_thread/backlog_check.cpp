#include "engine/storage_thread/backlog_check.hpp"

#include <utility>

#include "engine/storage_thread/until_drained.hpp"

namespace surge::engine {

backlog_check::then backlog_check::counted(clock::time_point now, std::int64_t outstanding,
                                           std::optional<double> earliest_in, bool shards_idle,
                                           std::int64_t finished) {
  if (std::exchange(recounting_, false)) {
    estimate_.counted(outstanding, finished);
    return after_count(outstanding, earliest_in);
  }
  estimate_.counted(outstanding, finished_before_);
  watch_.observe(shards_idle, handed_out_);
  if (watch_.sweep_due(outstanding, now)) {
    watch_.swept(now);
    sweep_for_count_ = true;
    return then::sweep;
  }
  return after_count(outstanding, earliest_in);
}

backlog_check::then backlog_check::after_count(std::int64_t outstanding,
                                               std::optional<double> earliest_in) {
  const bool due_soon =
      retry_due_within_wait(watch_.shards_empty(), outstanding, earliest_in, retry_wait_);
  if (watch_.drained(outstanding, due_soon) && until_drained_ && !drained_said_) {
    drained_said_ = true;
    return then::drained;
  }
  return then::nothing;
}

bool backlog_check::periodic_sweep(clock::time_point now) {
  if (!watch_.periodic_sweep_due(now)) return false;
  watch_.swept(now);
  sweep_for_count_ = false;
  return true;
}

bool backlog_check::swept() {
  if (!std::exchange(sweep_for_count_, false)) return false;
  recounting_ = true;
  return true;
}

bool backlog_check::sweep_failed() { return std::exchange(sweep_for_count_, false); }

}  // namespace surge::engine
