#pragma once
// Attempts in flight, each filed under one moment (the time it started, or the time it becomes
// overdue) in 50 ms buckets, so that a limit can leave out the ones filed before a threshold
// without visiting each attempt. A bucket's entry is allocated once, not per request.
#include <chrono>
#include <utility>
#include <vector>

namespace surge::engine {

class in_flight_ledger {
 public:
  using clock = std::chrono::steady_clock;
  using time_point = clock::time_point;
  using ticket = long long;  // the bucket an attempt was filed under; add's goes back to remove

  ticket add(time_point moment);
  void remove(ticket filed);

  int total() const { return total_; }
  // Attempts filed at or after `threshold` (whole buckets: an attempt filed in the threshold's
  // bucket still counts).
  int count_from(time_point threshold) const;
  // When the first bucket counted from `threshold` ends, so that its attempts stop counting:
  // time_point::max() if none is.
  time_point first_bucket_end_from(time_point threshold) const;

 private:
  // Attempts per bucket, sorted by bucket. A vector, not a map: a bucket begins every 50 ms and
  // the few live ones fit in storage that stays allocated.
  std::vector<std::pair<ticket, int>> buckets_;
  int total_ = 0;
};

}  // namespace surge::engine
