#pragma once
// Ownership leases (several drainers on one queue): each subscriber is owned by at most one
// live Surge drainer, which alone claims its rows. A drainer's heartbeat in surge_drainer keeps
// all of its ownerships alive in one write; an ownership whose drainer's heartbeat expired is
// free, so the subscribers of a drainer that died are taken over once its heartbeat expires, or
// at the next renewal when it ran on this host and its process is gone.
// Who should own what is proto::plan_ownership; this file reads the view and applies the plan.
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "proto/id_set.hpp"
#include "proto/ownership.hpp"
#include "storage/connection.hpp"

namespace surge::storage {

struct ownership_change {
  std::vector<std::int64_t> taken;
  std::vector<std::int64_t> released;
  // Owned at the last renewal but owned by another drainer now: this drainer missed renewals
  // for longer than its heartbeat lasts and was taken over.
  std::vector<std::int64_t> lost;
  // Assigned to this drainer but not yet released by their owner (proto::ownership_plan).
  std::size_t awaited = 0;
};

// For `surge stats`: every drainer whose heartbeat is live, with the subscribers it owns.
struct drainer_ownership {
  std::string name;
  std::string allowed;  // its --subscribers selection, "*" for all
  double started_at = 0;
  double seen_at = 0;
  std::vector<std::int64_t> subscribers;  // ascending
};

std::vector<drainer_ownership> read_ownership(connection& db, double now);

}  // namespace surge::storage
