#include "engine/storage_thread/periodic_reads.hpp"

#include <utility>

namespace surge::engine {

periodic_reads::periodic_reads(const storage_core_config& config)
    : ping_interval_(config.ping_interval),
      cadence_(config.storage, config.until_drained),
      backlog_(config.stuck_row_sweep_interval, config.until_drained_retry_wait,
               config.until_drained) {}

void periodic_reads::begin(clock::time_point now) {
  backlog_.begin(now);
  cadence_.reloaded(now);
  cadence_.renewed(now);
  cadence_.started(now);
  initial_reload_ = true;
}

bool periodic_reads::new_rows_check(clock::time_point now) {
  if (!cadence_.new_rows_check_due(now)) return false;
  cadence_.new_rows_checked(now);
  return true;
}

void periodic_reads::claim_answered(std::size_t rows) {
  cadence_.claim_answered();
  backlog_.handed_out(rows);
}

void periodic_reads::start_round(clock::time_point now, bool claiming, std::int64_t finished,
                                 bool shards_idle) {
  estimate_ = backlog_.estimate(finished);
  due_ = claiming ? cadence_.due(now, estimate_, shards_idle, backlog_.end_may_be_near())
                  : periodic_work{};
  ping_due_ = now - last_ping_ >= ping_interval_;
  stage_ = stage::ping;
}

periodic_reads::read periodic_reads::next(clock::time_point now, std::int64_t finished, bool busy) {
  switch (stage_) {
    case stage::ping:
      stage_ = stage::reload;
      if (ping_due_) {
        last_ping_ = now;
        return read::check_database;
      }
      [[fallthrough]];
    case stage::reload:
      stage_ = stage::renew;
      if (due_.reload_subscribers) {
        cadence_.reloaded(now);
        return read::reload_subscribers;
      }
      [[fallthrough]];
    case stage::renew:
      stage_ = stage::count;
      if (due_.renew_ownership) {
        cadence_.renewed(now);
        return read::renew_ownership;
      }
      [[fallthrough]];
    case stage::count:
      if (!due_.count_backlog) break;
      cadence_.backlog_checked(now);
      stage_ = stage::count_after_writes;
      // Outcomes held for their commit (commit_timing) would make this check skip; a check comes
      // at most every few hundred milliseconds (or twice in quick succession when the end may be
      // near), so they are written now.
      return read::write_outcomes_first;
    case stage::count_after_writes:
      stage_ = stage::done;
      if (busy) {
        backlog_.interrupted();
        return read::done;
      }
      backlog_.counting(finished);
      return read::count_backlog;
    case stage::done: break;
  }
  stage_ = stage::done;
  return read::done;
}

bool periodic_reads::reloaded(clock::time_point now) {
  const bool initial = std::exchange(initial_reload_, false);
  // A drain that never idles sweeps for stuck rows with the reload, at the sweep's interval.
  return !initial && backlog_.periodic_sweep(now);
}

backlog_check::then periodic_reads::counted(clock::time_point now, std::int64_t outstanding,
                                            std::optional<double> earliest_in, clock::duration took,
                                            bool shards_idle, std::int64_t finished) {
  if (!backlog_.recounting()) cadence_.backlog_counted(took);
  return backlog_.counted(now, outstanding, earliest_in, shards_idle, finished);
}

}  // namespace surge::engine
