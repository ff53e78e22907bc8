#pragma once
// Process-wide delivery counters: written by shards and the storage thread with relaxed atomics
// (each is a monotonic tally), read by the progress line and the exit summary.
#include <atomic>
#include <cstdint>

namespace surge::engine {

struct drain_counters {
  std::atomic<std::int64_t> claimed{0};
  std::atomic<std::int64_t> attempts{0};
  std::atomic<std::int64_t> delivered{0};
  std::atomic<std::int64_t> retried{0};
  std::atomic<std::int64_t> dead{0};
  std::atomic<std::int64_t> released{0};
  std::atomic<std::int64_t> coalesced{0};     // done without a request: a newer row went instead
  std::atomic<std::int64_t> keys_stopped{0};  // ordered keys a dead row stopped
  std::atomic<std::int64_t> batch_posts{0};   // requests that carried a batch
  std::atomic<std::int64_t> batched_rows{0};  // rows those requests carried
  std::atomic<std::int64_t> lost_leases{0};
  // Outcomes the database refused for the row's own sake (a constraint, a trigger, a value out
  // of range), written as dead instead, or left to the row's lease when even that was refused.
  std::atomic<std::int64_t> refused_outcomes{0};
  // A shard's rows go from `buffered` (claimed, waiting to be sent) to `in_flight` to
  // `outcomes_in_transit` (settled, held for the shard's flush or on their way to the storage
  // thread, which takes them off). The shards are idle only when all three are 0, or a drained
  // check would count rows as still due and put the drain's end off by an interval. So a row is
  // counted where it goes before it leaves where it was, with a release on leaving; the storage
  // thread reads the three in that order, each with an acquire (storage_core::shards_idle).
  std::atomic<std::int64_t> buffered{0};
  std::atomic<std::int64_t> in_flight{0};
  std::atomic<std::int64_t> outcomes_in_transit{0};
  std::atomic<std::int64_t> fresh_retries{0};  // stale keep-alive connections retried
  std::atomic<std::int64_t> storage_errors{0};
  std::atomic<std::int64_t> backlog{-1};           // due rows at the last check, -1 unknown
  std::atomic<std::int64_t> owned_subscribers{0};  // ownership leases held (storage/ownership)
  // The storage connection's commits that wrote to the WAL, and the frames (pages) they wrote.
  std::atomic<std::int64_t> wal_commits{0};
  std::atomic<std::int64_t> wal_frames{0};
  // Times the storage thread saw rows queued by another connection and woke their subscribers.
  std::atomic<std::int64_t> new_row_wakes{0};
  // Last, so that the hot counters above keep their places on their cache lines.
  std::atomic<std::int64_t> refused_target_holds{0};  // subscribers held for a refused target

  void add(std::atomic<std::int64_t>& counter, std::int64_t n = 1) {
    counter.fetch_add(n, std::memory_order_relaxed);
  }
};

}  // namespace surge::engine
