#pragma once
// When the storage thread commits the outcomes it holds. Sans-I/O: the storage thread says how
// many wait and how long ago it last wrote some; this decides.
//
// A commit of outcomes rewrites, for each subscriber with an outcome in it, that subscriber's
// page of the due index (a finished row leaves it) and the page of its finished rows. Written
// with every claim, a few milliseconds apart, a fast drain's outcomes would come two or three
// per subscriber per commit, and those pages would be most of its WAL frames. When partners'
// limits pace the flow, each subscriber finishes a row or two per 100 ms, so commits 20 ms
// apart wrote its pages for every row (3.4 WAL frames per delivery in bench/origins.py
// slow_partners against 2.4 at 100 ms). At full speed the 1,000 rows come first, which bounds
// the write lock and what a crash sends again. Claims still commit at once, on their own when
// outcomes are not due, so holding outcomes back never delays a send.
#include <chrono>
#include <cstddef>

#include "engine/config.hpp"

namespace surge::engine {

// Whether the outcomes waiting (and subscriber deactivations, which ride with them) should be
// written now. `force`: the drain is ending or its end is being checked. `frees_key`: one of them
// finishes an ordered key's row, whose next row waits for that write to be claimed: a key moves
// at its partner's pace, not at the commit interval's.
bool outcomes_due(const commit_timing& timing, std::size_t waiting, bool deactivations_waiting,
                  std::chrono::steady_clock::duration since_last_commit, bool force = false,
                  bool frees_key = false);

}  // namespace surge::engine
