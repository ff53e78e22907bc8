#pragma once
// The queue both cores' simulations keep in memory: rows due by time, leased until a time when
// claimed (a lease run out frees its row), and outcomes fenced on their lease.
// tests/engine/shard/core_simulation.hpp answers a shard's claims from it as the storage thread
// would; tests/engine/storage_thread/memory_drain_store.hpp is a storage::drain_store over it.
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "proto/id_set.hpp"
#include "storage/claims.hpp"
#include "storage/outcomes.hpp"

namespace surge::engine::testing {

struct queue_row {
  storage::claimed_row row;
  enum class state { pending, leased, done, dead, coalesced } now = state::pending;
  std::vector<storage::outcome_kind> outcomes;  // every outcome written for it, in order
};

class simulated_queue {
 public:
  std::map<std::int64_t, queue_row> rows;
  // Rows claimed again because their lease ran out with no outcome written.
  int lapsed_and_claimed_again = 0;

  // Queues `row` under its id, which must be new; returns the id.
  std::int64_t add(storage::claimed_row row) {
    const auto id = row.id;
    const bool added = rows.emplace(id, queue_row{.row = std::move(row)}).second;
    EXPECT_TRUE(added) << "row " << id << " is queued already";
    return id;
  }

  // Nobody holds it at `now`: pending, or leased by a lease that has run out.
  static bool free_at(const queue_row& queued, double now) {
    return queued.now == queue_row::state::pending ||
           (queued.now == queue_row::state::leased && queued.row.lease <= now);
  }
  static bool unfinished(const queue_row& queued) {
    return queued.now == queue_row::state::pending || queued.now == queue_row::state::leased;
  }
  void lease(queue_row& queued, double until) {
    if (queued.now == queue_row::state::leased) ++lapsed_and_claimed_again;
    queued.now = queue_row::state::leased;
    queued.row.lease = until;
  }

  struct claim {
    std::vector<storage::claimed_row> rows;
    bool more_due = false;  // one more was due and free
  };
  // Up to `count` rows of `subscriber` due and free at `now`, leased until `until`: the earliest
  // due first, then by id, as the stores' claims read them.
  claim take(std::int64_t subscriber, int count, double now, double until) {
    std::vector<queue_row*> due;
    for (auto& [id, queued] : rows) {
      if (queued.row.subscriber_id != subscriber || !free_at(queued, now)) continue;
      if (queued.row.next_attempt_at <= now) due.push_back(&queued);
    }
    std::stable_sort(due.begin(), due.end(), [](const queue_row* a, const queue_row* b) {
      return a->row.next_attempt_at < b->row.next_attempt_at;
    });
    claim out;
    out.more_due = static_cast<int>(due.size()) > count;
    for (std::size_t i = 0; i < due.size() && static_cast<int>(i) < count; ++i) {
      lease(*due[i], until);
      out.rows.push_back(due[i]->row);
    }
    return out;
  }

  // Whether `outcome` still holds its row's lease: nothing else may be written.
  bool holds_lease(const storage::outcome& outcome) const {
    const auto found = rows.find(outcome.delivery_id);
    return found != rows.end() && found->second.now == queue_row::state::leased &&
           found->second.row.lease == outcome.lease;
  }
  // Writes `outcome`, whose lease holds, to its row.
  void apply(const storage::outcome& outcome) {
    auto& queued = rows.at(outcome.delivery_id);
    queued.outcomes.push_back(outcome.kind);
    queued.row.lease = 0;
    switch (outcome.kind) {
      case storage::outcome_kind::done:
        queued.now = queue_row::state::done;
        queued.row.attempts = outcome.attempts;
        break;
      case storage::outcome_kind::dead:
        queued.now = queue_row::state::dead;
        queued.row.attempts = outcome.attempts;
        break;
      case storage::outcome_kind::coalesced: queued.now = queue_row::state::coalesced; break;
      case storage::outcome_kind::release: queued.now = queue_row::state::pending; break;
      case storage::outcome_kind::retry:
        queued.now = queue_row::state::pending;
        queued.row.attempts = outcome.attempts;
        queued.row.next_attempt_at = outcome.next_attempt_at;
        break;
    }
  }

  // Due rows and leased ones, as storage/queue.hpp counts them.
  std::int64_t count_outstanding(double now, const proto::id_set& which) const {
    std::int64_t outstanding = 0;
    for (const auto& [id, queued] : rows) {
      if (!unfinished(queued) || !which.contains(queued.row.subscriber_id)) continue;
      outstanding += queued.row.next_attempt_at <= now || !free_at(queued, now) ? 1 : 0;
    }
    return outstanding;
  }
  // The earliest moment a row no lease holds fell or falls due, overdue ones included: the later
  // of its next attempt and its creation (storage/maintenance.hpp).
  std::optional<double> earliest_scheduled(double now, const proto::id_set& which) const {
    std::optional<double> earliest;
    for (const auto& [id, queued] : rows) {
      if (!unfinished(queued) || !free_at(queued, now)) continue;
      if (!which.contains(queued.row.subscriber_id)) continue;
      const double due = std::max(queued.row.next_attempt_at, queued.row.created_at);
      earliest = std::min(earliest.value_or(due), due);
    }
    return earliest;
  }

  int count(queue_row::state state) const {
    return static_cast<int>(std::count_if(rows.begin(), rows.end(), [state](const auto& entry) {
      return entry.second.now == state;
    }));
  }
  bool all(queue_row::state state) const { return count(state) == static_cast<int>(rows.size()); }
};

}  // namespace surge::engine::testing
