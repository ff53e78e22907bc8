#pragma once
// Which live Surge drainer owns which subscriber (several drainers on one queue). Every
// drainer computes the same assignment from the same view of the queue, so they agree without
// talking: subscribers are spread evenly, a drainer's --subscribers selection is honoured, and
// when one joins or leaves only a few subscribers move. The decision of what this drainer does
// with its own leases is a pure function of that view and the time; storage/ownership applies it.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "proto/id_set.hpp"

namespace surge::proto {

struct live_drainer {
  std::string name;    // "surge@host:pid"
  id_set subscribers;  // what its --subscribers allows it to take
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

// What a renewal sees without reading every subscriber and owner: the live drainers (ordered by
// name), a fingerprint of the subscriber table, and how many ownerships name this drainer. Reading
// all of them costs about 1 ms per 1,000 subscribers, under the queue's write lock, every second,
// on every drainer.
struct renewal_view {
  std::vector<live_drainer> live;
  std::int64_t subscriber_count = 0;
  std::int64_t highest_subscriber_id = 0;
  std::int64_t owned_by_self = 0;
};

// What the last renewal that read everything (and applied its plan) saw.
struct full_renewal {
  renewal_view view;
  double at = 0;                 // Unix seconds
  bool awaiting = false;         // its plan had subscribers assigned to us still owned by another
  std::int64_t owned_after = 0;  // ownerships naming this drainer once its plan was applied
};

// Whether a renewal at `now` may only extend the heartbeat and keep what it owns. It may when
// the plan cannot have changed: the same live drainers with the same selections and the same
// subscribers as at the last full renewal, no subscriber awaited from another drainer, this
// drainer's heartbeat never lapsed since (`alive_until` of the last renewal is still ahead), and
// as many ownerships name it as its plan left: none was taken by a drainer that judged its
// heartbeat otherwise (a clock far off, a heartbeat another program rewrote). A full renewal also
// runs at least every `full_every` seconds, for a change the fingerprint cannot see.
bool heartbeat_is_enough(const std::optional<full_renewal>& last, const renewal_view& view,
                         double now, double alive_until, double full_every);

}  // namespace surge::proto
