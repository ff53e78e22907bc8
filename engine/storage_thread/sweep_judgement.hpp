#pragma once
// How far the backlog sweep (coalesce_sweeper) has judged each coalescing subscriber's rows:
// written by the sweep's thread once its marks are committed, read by the storage thread as it
// claims. A row above the bound may be an older update of a key whose newest row the sweep has
// not seen yet; it waits for the next sweep (a second) rather than be sent stale.
#include <cstdint>
#include <mutex>
#include <span>
#include <unordered_map>

#include "storage/claims.hpp"

namespace surge::engine {

class sweep_judgement {
 public:
  void judged(std::int64_t subscriber, std::int64_t through) {
    std::lock_guard lock(mutex_);
    through_[subscriber] = through;
  }
  // Each entry with a bound (a coalescing subscriber's) is raised to what the sweep judged: 0,
  // nothing, before the subscriber's first sweep.
  void bound(std::span<storage::subscriber_demand> demand) const {
    std::lock_guard lock(mutex_);
    for (auto& entry : demand) {
      if (!entry.judged_through) continue;
      const auto found = through_.find(entry.subscriber_id);
      entry.judged_through = found == through_.end() ? 0 : found->second;
    }
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::int64_t, std::int64_t> through_;
};

}  // namespace surge::engine
