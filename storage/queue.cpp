#include "storage/queue.hpp"

#include <algorithm>
#include <map>

namespace surge::storage {

queue_stats with_totals(const std::map<std::int64_t, subscriber_counts>& by_subscriber) {
  queue_stats stats;
  auto& total = stats.total;
  for (const auto& [id, counts] : by_subscriber) {
    stats.per_subscriber.push_back(counts);
    total.pending += counts.pending;
    total.retry += counts.retry;
    total.done += counts.done;
    total.coalesced += counts.coalesced;
    total.dead += counts.dead;
    total.due_now += counts.due_now;
    total.leased += counts.leased;
    total.oldest_due_age = std::max(total.oldest_due_age, counts.oldest_due_age);
    for (const auto& [owner, rows] : counts.leased_by) total.leased_by[owner] += rows;
  }
  return stats;
}

}  // namespace surge::storage
