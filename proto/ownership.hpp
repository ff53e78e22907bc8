#pragma once
// Which live Surge drainer owns which subscriber (DESIGN section 3, several drainers). Every
// drainer computes the same assignment from the same view of the queue, so they agree without
// talking: subscribers are spread evenly, a drainer's --subscribers selection is honoured, and
// when one joins or leaves only a few subscribers move. The decision of what this drainer does
// with its own leases is a pure function of that view and the time; storage/ownership applies it.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "proto/id_set.hpp"

namespace surge::proto {

struct live_drainer {
  std::string name;     // "surge@host:pid"
  id_set subscribers;   // what its --subscribers allows it to take
};

struct subscriber_owner {
  std::int64_t subscriber_id = 0;
  std::string drainer;
  double expires_at = 0;  // Unix seconds; the ownership is free from then on
};

// The owner each subscriber should have among `live` drainers: the drainer its rendezvous hash
// ranks first among those allowed to take it and still under an even share (the number of
// subscribers some live drainer may take, divided by the live drainers, rounded up), taken in
// ascending subscriber order. A subscriber no live drainer may take gets "". `subscribers` must
// be ascending; the result is parallel to it.
std::vector<std::string> assign_owners(std::span<const std::int64_t> subscribers,
                                       std::span<const live_drainer> live);

struct ownership_plan {
  std::vector<std::int64_t> keep;     // owned now and assigned to us: renew
  std::vector<std::int64_t> take;     // free (no owner or expired) and assigned to us
  std::vector<std::int64_t> release;  // owned now but assigned elsewhere, or no longer ours
  // Assigned to us but still owned by another live drainer, which releases it at its next
  // renewal: worth renewing again soon to take it as soon as it is free.
  std::vector<std::int64_t> awaited;
};

// What drainer `self` (one of `live`) does at `now`. It takes only free subscribers, so two
// drainers never own one at once: a subscriber moves when its owner releases it at its next
// renewal and the new owner takes it at the one after.
ownership_plan plan_ownership(std::string_view self, std::span<const std::int64_t> subscribers,
                              std::span<const live_drainer> live,
                              std::span<const subscriber_owner> owners, double now);

}  // namespace surge::proto
