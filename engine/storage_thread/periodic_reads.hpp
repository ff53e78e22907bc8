#pragma once
// The storage thread's periodic reads, in a round's order after its claims and writes: the
// database check (a ping, and a look for the queue file), the subscriber reload, the ownership
// renewal and the backlog check (the outcomes held written first, so that the count does not
// skip), with what follows them: the stuck-row sweep a busy drain runs with a reload, the sweep
// and the count again before an end, and the end of --until-drained. When each falls due is
// storage_cadence's rule and what a count means backlog_check's; this keeps a round's reads in
// order. Pure state: the storage core performs each read and hands its result back.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "engine/storage_thread/backlog_check.hpp"
#include "engine/storage_thread/cadence.hpp"
#include "engine/storage_thread/storage_core_config.hpp"

namespace surge::engine {

class periodic_reads {
 public:
  using clock = std::chrono::steady_clock;

  enum class read {
    check_database,
    reload_subscribers,
    renew_ownership,
    write_outcomes_first,  // the count comes next: the outcomes held go now (whatever is due)
    count_backlog,
    done,  // nothing more this round
  };

  explicit periodic_reads(const storage_core_config& config);

  // The drain starts at `now` with its first reload and renewal (begin()'s, not due ones).
  void begin(clock::time_point now);
  // Whether to ask the database about rows other connections queued, at `now` (then noted).
  bool new_rows_check(clock::time_point now);
  // A claim was answered with `rows` rows for the shards.
  void claim_answered(std::size_t rows);

  // A round's reads begin: what is due at `now` while the drain claims (`finished`: rows
  // finished so far; `shards_idle`: nothing buffered, in flight or in transit). A stopped drain
  // only pings.
  void start_round(clock::time_point now, bool claiming, std::int64_t finished, bool shards_idle);
  // The round's next read. `finished` as above; `busy`: outcomes or claims wait, which a count
  // now would leave uncounted (the check is skipped, and said so to backlog_watch).
  read next(clock::time_point now, std::int64_t finished, bool busy);
  // The backlog as start_round() estimated it (the last count less the rows finished since); -1
  // before the first count.
  std::int64_t round_estimate() const { return estimate_; }

  // Results.
  // The subscribers were reloaded: whether the stuck-row sweep runs now (not with begin()'s).
  bool reloaded(clock::time_point now);
  void reload_failed() { initial_reload_ = false; }
  // A renewal found subscribers assigned here waiting for their owner to let go.
  void renewed(bool handoff_awaited) { cadence_.handoff_awaited(handoff_awaited); }
  // The count found `outstanding` rows this drain can still finish; `took`: how long it ran.
  backlog_check::then counted(clock::time_point now, std::int64_t outstanding,
                              std::optional<double> earliest_in, clock::duration took,
                              bool shards_idle, std::int64_t finished);
  void count_failed() { backlog_.count_failed(); }
  // The sweep ended: whether the count runs again (without the rows it dead-lettered).
  bool swept() { return backlog_.swept(); }
  // The sweep failed: whether it was a check's (the error is then the check's).
  bool sweep_failed() { return backlog_.sweep_failed(); }

 private:
  enum class stage { ping, reload, renew, count, count_after_writes, done };

  std::chrono::milliseconds ping_interval_;
  storage_cadence cadence_;  // when reloads, renewals, new-row checks and counts fall due
  backlog_check backlog_;    // the backlog's checks, their sweeps and --until-drained's end
  stage stage_ = stage::done;
  periodic_work due_;
  std::int64_t estimate_ = -1;
  bool ping_due_ = false;
  bool initial_reload_ = false;  // begin()'s reload: no sweep with it
  clock::time_point last_ping_{};
};

}  // namespace surge::engine
