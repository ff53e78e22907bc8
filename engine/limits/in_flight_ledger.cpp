#include "engine/limits/in_flight_ledger.hpp"

#include <algorithm>
#include <iterator>

namespace surge::engine {

namespace {
constexpr auto bucket_width = std::chrono::milliseconds(50);

in_flight_ledger::ticket bucket_of(in_flight_ledger::time_point moment) {
  return moment.time_since_epoch() / bucket_width;
}

// The first of the (sorted) buckets at or after `bucket`.
template <typename Buckets>
auto first_from(Buckets& buckets, in_flight_ledger::ticket bucket) {
  return std::lower_bound(
      buckets.begin(), buckets.end(), bucket,
      [](const auto& entry, in_flight_ledger::ticket t) { return entry.first < t; });
}
}  // namespace

in_flight_ledger::ticket in_flight_ledger::add(time_point moment) {
  const ticket bucket = bucket_of(moment);
  // Moments almost always arrive in order, so the search ends at the back.
  auto found = buckets_.end();
  while (found != buckets_.begin() && std::prev(found)->first >= bucket) --found;
  if (found != buckets_.end() && found->first == bucket) {
    ++found->second;
  } else {
    buckets_.insert(found, {bucket, 1});
  }
  ++total_;
  return bucket;
}

void in_flight_ledger::remove(ticket filed) {
  const auto found = first_from(buckets_, filed);
  if (found == buckets_.end() || found->first != filed) return;
  if (--found->second == 0) buckets_.erase(found);
  --total_;
}

int in_flight_ledger::count_from(time_point threshold) const {
  // Only the buckets before the threshold are visited: they are the few left out.
  const ticket first = bucket_of(threshold);
  int before = 0;
  for (auto it = buckets_.begin(); it != buckets_.end() && it->first < first; ++it) {
    before += it->second;
  }
  return total_ - before;
}

in_flight_ledger::time_point in_flight_ledger::first_bucket_end_from(time_point threshold) const {
  const auto next = first_from(buckets_, bucket_of(threshold));
  if (next == buckets_.end()) return time_point::max();
  return time_point(bucket_width * (next->first + 1));
}

}  // namespace surge::engine
