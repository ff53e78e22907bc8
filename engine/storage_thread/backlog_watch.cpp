#include "engine/storage_thread/backlog_watch.hpp"

#include <algorithm>

namespace surge::engine {

std::chrono::steady_clock::duration backlog_check_interval(
    const backlog_check_timing& timing, std::int64_t backlog, bool shards_idle,
    std::chrono::steady_clock::duration last_count_took, bool end_may_be_near) {
  // An unknown backlog (-1, before the first count) is taken as large.
  const bool large = backlog < 0 || backlog > timing.large_from;
  const bool end_in_sight =
      timing.end_in_sight.count() > 0 && end_may_be_near && shards_idle && backlog == 0;
  const std::chrono::steady_clock::duration base = end_in_sight            ? timing.end_in_sight
                                                   : large && !shards_idle ? timing.large_backlog
                                                                           : timing.small_backlog;
  const std::chrono::steady_clock::duration spaced = std::min<std::chrono::steady_clock::duration>(
      last_count_took * timing.count_cost_multiple, timing.longest_wait);
  return std::max(base, spaced);
}

bool first_count_due(bool claim_answered, std::chrono::steady_clock::duration since_start,
                     std::chrono::steady_clock::duration wait) {
  return claim_answered || since_start >= wait;
}

void backlog_watch::observe(bool shards_empty, std::int64_t claimed_total) {
  shards_empty_ = shards_empty;
  // Rows handed out since the last check mean the shards had work in between, however empty
  // they look at this instant: mid-drain a shard can finish its last request just before a
  // claim's answer reaches it, and a sweep then would read the whole backlog in mid-spike.
  const bool claimed_since = claimed_total != claimed_at_last_check_;
  claimed_at_last_check_ = claimed_total;
  settled_checks_ = shards_empty && !claimed_since ? settled_checks_ + 1 : 0;
  if (!shards_empty) end_may_be_near_ = true;
}

bool backlog_watch::sweep_due(std::int64_t outstanding, clock::time_point now) const {
  // A check that could end the drain sweeps first, even right after a last claim.
  const bool may_end = shards_empty_ && quiet_checks_ >= 1;
  if (settled_checks_ < 2 && !may_end) return false;
  return !swept_ || (outstanding > 0 && periodic_sweep_due(now));
}

bool backlog_watch::drained(std::int64_t outstanding, bool due_soon) {
  quiet_checks_ = outstanding == 0 && shards_empty_ && !due_soon ? quiet_checks_ + 1 : 0;
  if (quiet_checks_ >= 1) {
    end_may_be_near_ = true;
  } else if (shards_empty_) {
    end_may_be_near_ = false;  // idle, yet something keeps the drain going
  }
  return quiet_checks_ >= 2;
}

}  // namespace surge::engine
