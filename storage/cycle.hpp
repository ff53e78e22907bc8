#pragma once
// One storage cycle in one transaction: the outcomes due (engine/storage_thread/commit_timing) and
// the next claim commit together. A subscriber's finished rows and the rows claimed next often
// share table pages, so such a page is written to the WAL once instead of once by the claim
// and again by the outcomes a few milliseconds later. A cycle with no outcomes due claims alone.
#include <cstdint>
#include <span>
#include <vector>

#include "storage/claims.hpp"
#include "storage/outcomes.hpp"
#include "storage/ownership.hpp"
#include "storage/token_leases.hpp"

namespace surge::storage {

struct cycle_result {
  write_report written;
  std::vector<claimed_row> claimed;
  std::vector<token_grant> granted;  // one per demand entry that asked for tokens
  // Subscribers whose bucket could not be read because another database session holds their
  // row locked (PostgreSQL): granted nothing this cycle, asked again soon.
  std::vector<std::int64_t> held_subscribers;
  // Subscribers answered with fewer rows than asked although more are due: their next claim
  // should come at once, not after an idle poll.
  std::vector<std::int64_t> more_due;
};

}  // namespace surge::storage
