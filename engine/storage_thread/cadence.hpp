#pragma once
// When the storage thread's periodic work falls due: reloading the subscribers, renewing this
// drain's ownership, asking whether other programs queued rows, and counting the backlog.
// Sans-I/O: the storage thread says what it did and when, and asks with `now` what is due; the
// tests drive it on a simulated clock (tests/engine/storage_thread/cadence_test.cpp).
#include <chrono>
#include <cstdint>

#include "engine/config.hpp"
#include "engine/storage_thread/backlog_watch.hpp"

namespace surge::engine {

struct periodic_work {
  bool reload_subscribers = false;
  bool renew_ownership = false;
  bool count_backlog = false;

  friend bool operator==(const periodic_work&, const periodic_work&) = default;
};

class storage_cadence {
 public:
  using clock = std::chrono::steady_clock;

  // Nothing has run yet: the first reload and renewal are due at once, the first backlog count
  // once a claim has been answered or `first_count_wait` has passed since `started`.
  // `until_drained`: the counts may end the drain, so they come often once its end is in sight.
  storage_cadence(const storage_worker_config& config, bool until_drained);
  // The storage thread starts its loop (after the first reload and renewal).
  void started(clock::time_point at) { start_ = at; }

  // What is due at `now` while the drain claims. `backlog` is the last count (-1 before the
  // first); `shards_idle` says the shards hold no rows and no request is in flight;
  // `end_may_be_near`: backlog_watch::end_may_be_near.
  periodic_work due(clock::time_point now, std::int64_t backlog, bool shards_idle,
                    bool end_may_be_near = false) const;
  // Whether to ask the database if another connection committed rows (0 interval: never).
  bool new_rows_check_due(clock::time_point now) const;

  void reloaded(clock::time_point at) { last_reload_ = at; }
  void renewed(clock::time_point at) { last_renewal_ = at; }
  // What the last successful renewal found: subscribers assigned to this drain wait for their
  // owner to let go, so the next renewal comes after the short handoff poll instead of the
  // full interval.
  void handoff_awaited(bool awaited) { handoff_awaited_ = awaited; }
  void new_rows_checked(clock::time_point at) { last_new_rows_check_ = at; }
  // A backlog check began at `at` (whether or not its count ran).
  void backlog_checked(clock::time_point at) { last_backlog_check_ = at; }
  // Its count took `took`: the next one is spaced by that (backlog_check_interval).
  void backlog_counted(clock::duration took) { last_count_took_ = took; }
  void claim_answered() { claim_answered_ = true; }

 private:
  clock::duration subscriber_reload_;
  clock::duration ownership_renew_;
  clock::duration ownership_handoff_poll_;
  clock::duration new_rows_check_;
  clock::duration first_count_wait_;
  backlog_check_timing backlog_timing_;
  clock::time_point start_{};
  clock::time_point last_reload_{};
  clock::time_point last_renewal_{};
  clock::time_point last_new_rows_check_{};
  clock::time_point last_backlog_check_{};
  clock::duration last_count_took_{};
  bool handoff_awaited_ = false;
  bool claim_answered_ = false;
};

}  // namespace surge::engine
