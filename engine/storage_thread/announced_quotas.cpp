#include "engine/storage_thread/announced_quotas.hpp"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <utility>

namespace surge::engine {

void announced_quotas::announced(std::vector<storage::partner_quota_row> rows) {
  std::move(rows.begin(), rows.end(), std::back_inserter(pending_));
}

std::span<const storage::partner_quota_row> announced_quotas::take(clock::time_point now,
                                                                   bool forced) {
  last_write_ = now;
  forced_ = forced;
  // The latest per subscriber: shards hand them over in the order they were seen.
  std::stable_sort(pending_.begin(), pending_.end(),
                   [](const auto& a, const auto& b) { return a.subscriber_id < b.subscriber_id; });
  in_flight_.clear();
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    const bool last_of_its_subscriber =
        i + 1 == pending_.size() || pending_[i + 1].subscriber_id != pending_[i].subscriber_id;
    if (last_of_its_subscriber) in_flight_.push_back(std::move(pending_[i]));
  }
  pending_.clear();
  return in_flight_;
}

void announced_quotas::failed() {
  if (!forced_) {
    // Ahead of what was announced meanwhile, so that the newer announcement wins.
    in_flight_.insert(in_flight_.end(), std::make_move_iterator(pending_.begin()),
                      std::make_move_iterator(pending_.end()));
    pending_ = std::move(in_flight_);
  }
  in_flight_.clear();
}

}  // namespace surge::engine
