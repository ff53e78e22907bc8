#pragma once
// When the storage thread may take the shards to be out of work, when an --until-drained
// drain is done, and how often its periodic checks run. Sans-I/O: the
// storage thread counts rows and sweeps; this decides, with the clock passed in.
#include <chrono>
#include <cstdint>

namespace surge::engine {

// How long after the last backlog check the next one is due. While the backlog is large and
// the shards have work the count only feeds the progress line and the backlog gauge, so it is
// refreshed rarely; once the shards are idle or the backlog small, the end may be near and
// --until-drained should stop promptly. Either way the next check waits at least
// `count_cost_multiple` times as long as the last count took: the count scans the due index
// on the storage thread (about 100 ms at a million due rows on SQLite, 50 ms at 100,000 on a
// PostgreSQL queue the drain is turning over), which claims and writes nothing meanwhile, so
// its share of that thread (and the server's work on it) stays under 1 / count_cost_multiple. The
// wait is capped, so that one count slowed by a stalled disk or a busy server does not hold
// --until-drained for minutes after the last row. With the end in sight (the shards idle, the
// backlog estimated empty, and the last check either saw the shards at work or found nothing
// left: backlog_watch::end_may_be_near) an --until-drained drain checks at `end_in_sight`, so
// that it ends a few tens of milliseconds after its last outcome rather than half a second.
// Once a check with idle shards found something that keeps the drain going (a retry due within
// the wait, outcomes another session holds, rows left, a failed count), the checks go back to
// the drained-check interval.
struct backlog_check_timing {
  std::chrono::milliseconds small_backlog;    // the drained-check interval
  std::chrono::milliseconds large_backlog;    // the backlog-refresh interval
  std::chrono::milliseconds end_in_sight{0};  // 0: no shorter interval (no --until-drained)
  std::int64_t large_from = 1000;             // due rows above which the backlog counts as large
  int count_cost_multiple = 50;
  std::chrono::milliseconds longest_wait = std::chrono::seconds(30);
};
std::chrono::steady_clock::duration backlog_check_interval(
    const backlog_check_timing& timing, std::int64_t backlog, bool shards_idle,
    std::chrono::steady_clock::duration last_count_took, bool end_may_be_near = false);

// The backlog between two counts: the last count less the rows finished since (delivered, dead
// or coalesced; a retried or released row stays due). A count reads every due row, so while the
// backlog is large it runs seldom (backlog_check_interval), and the gauge, the progress line and
// the choice of the next check's interval follow the drain's own progress instead. Rows queued
// since the count show at the next one: the estimate errs low, towards checking sooner.
class backlog_estimate {
 public:
  // A count found `rows` (-1: none yet) when `finished_total` rows had been finished.
  void counted(std::int64_t rows, std::int64_t finished_total) {
    counted_ = rows;
    finished_at_count_ = finished_total;
  }
  std::int64_t at(std::int64_t finished_total) const {
    if (counted_ < 0) return counted_;
    const auto left = counted_ - (finished_total - finished_at_count_);
    return left > 0 ? left : 0;
  }

 private:
  std::int64_t counted_ = -1;
  std::int64_t finished_at_count_ = 0;
};

// Whether the drain's first backlog count may run. The count reads every due row (about 20 ms
// at 200,000 rows) on the storage thread, so the shards' first claims, asked a moment after
// start, would wait behind it and the first sends with them. It runs once a claim has been
// answered, or after `wait` when no shard asks (nothing it may send: its end is then decided by
// counts alone).
bool first_count_due(bool claim_answered, std::chrono::steady_clock::duration since_start,
                     std::chrono::steady_clock::duration wait);

class backlog_watch {
 public:
  using clock = std::chrono::steady_clock;

  // No stuck-row sweep runs in the first `sweep_interval` after `start` unless the shards run
  // out of work: at start-up a sweep would read the whole backlog before the first send.
  backlog_watch(clock::duration sweep_interval, clock::time_point start)
      : sweep_interval_(sweep_interval), last_sweep_(start) {}

  // A check was skipped because outcomes or claims were waiting: quiet checks start over.
  void interrupted() {
    quiet_checks_ = 0;
    end_may_be_near_ = false;
  }
  // A check's count failed: no quick check follows it.
  void check_failed() { end_may_be_near_ = false; }
  // Whether the next check may come at the short interval: the last one saw the shards at work
  // (they may just have run out), or found nothing left (the confirming second check).
  bool end_may_be_near() const { return end_may_be_near_; }

  // The start of one check: whether nothing was buffered, in flight or in transit on any shard, and
  // how many claimed rows the storage thread has handed to the shards so far.
  void observe(bool shards_empty, std::int64_t claimed_total);
  bool shards_empty() const { return shards_empty_; }

  // Whether to look for stuck rows now, with `outstanding` the due rows just counted: once the
  // shards have run out of work, always before the drain is called drained, then at most once
  // per interval while rows stay outstanding.
  bool sweep_due(std::int64_t outstanding, clock::time_point now) const;
  // The same interval, for the sweep the subscriber reload runs in a drain that never idles.
  bool periodic_sweep_due(clock::time_point now) const {
    return now - last_sweep_ >= sweep_interval_;
  }
  void swept(clock::time_point now) {
    last_sweep_ = now;
    swept_ = true;
  }

  // The end of the check, with the count after any sweep; `due_soon`: rows fall due within the
  // retry wait of --until-drained. True once two checks in a row found nothing to do: one quiet
  // check could miss a claim's answer still on its way to a shard.
  bool drained(std::int64_t outstanding, bool due_soon);

 private:
  clock::duration sweep_interval_;
  clock::time_point last_sweep_;
  bool swept_ = false;
  bool shards_empty_ = false;
  std::int64_t claimed_at_last_check_ = 0;
  int settled_checks_ = 0;
  int quiet_checks_ = 0;
  bool end_may_be_near_ = false;
};

}  // namespace surge::engine
