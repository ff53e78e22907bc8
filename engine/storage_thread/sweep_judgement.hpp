#pragma once
// How far the backlog sweep (coalesce_sweeper) has judged each coalescing subscriber's rows:
// written by the sweep's thread once its marks are committed, read by the storage thread as it
// claims. A row above the bound may be an older update of a key whose newest row the sweep has
// not seen yet; it waits for the next sweep (a second) rather than be sent stale. A sweep that
// keeps failing (a database that refuses its reads) must not stop the subscriber: once a
// judgement is older than `stale_after`, its rows are claimed unjudged, as without the sweep.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <span>
#include <unordered_map>

#include "storage/claims.hpp"

namespace surge::engine {

class sweep_judgement {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr clock::duration stale_after = std::chrono::seconds(30);

  explicit sweep_judgement(clock::time_point started = clock::now()) : started_(started) {}

  void judged(std::int64_t subscriber, std::int64_t through, clock::time_point now) {
    std::lock_guard lock(mutex_);
    through_[subscriber] = {through, now};
  }
  // Each entry with a bound (a coalescing subscriber's) is raised to what the sweep judged: 0,
  // nothing, before the subscriber's first sweep; no bound once the judgement is stale.
  void bound(std::span<storage::subscriber_demand> demand, clock::time_point now) const {
    std::lock_guard lock(mutex_);
    for (auto& entry : demand) {
      if (!entry.judged_through) continue;
      const auto found = through_.find(entry.subscriber_id);
      const auto judged_at = found == through_.end() ? started_ : found->second.at;
      if (now - judged_at > stale_after) {
        entry.judged_through.reset();
      } else {
        entry.judged_through = found == through_.end() ? 0 : found->second.through;
      }
    }
  }

 private:
  struct judgement {
    std::int64_t through = 0;
    clock::time_point at;
  };
  clock::time_point started_;
  mutable std::mutex mutex_;
  std::unordered_map<std::int64_t, judgement> through_;
};

}  // namespace surge::engine
