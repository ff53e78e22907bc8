#pragma once
// This drain's ownership of subscribers, as the storage thread renews and releases it: what each
// renewal's answer tells the shards, and that ownership is released once (at the stop, or at the
// end). The database decides who owns what (storage/ownership.hpp); this keeps what the drain
// must remember between renewals.
#include <utility>
#include <vector>

#include "engine/storage_thread/storage_actions.hpp"
#include "storage/ownership.hpp"

namespace surge::engine {

class ownership_round {
 public:
  // A renewal goes out; `first`: begin()'s, before any shard sent, whose buckets were just seeded.
  void renewing(bool first) { first_ = first; }
  // The renewal's answer, as what the shards are told: subscribers taken over (their buckets
  // re-read from the database, unless this was the first renewal), then those released or lost.
  std::vector<storage_do::tell_owner_change> renewed(const storage::ownership_change& change);
  // Whether ownership is to be released now: true the first time only.
  bool release() { return !std::exchange(released_, true); }

 private:
  bool first_ = false;
  bool released_ = false;
};

}  // namespace surge::engine
