#pragma once
// The messages between the shards and the storage thread, in one place: what a shard asks of the
// storage thread (claims, outcomes, unspent tokens, announced quotas) and what the storage thread
// tells a shard (subscribers, claimed rows, new rows, ownership changes). Both cores and their
// executors include this header and not each other's folders.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "storage/claims.hpp"
#include "storage/outcomes.hpp"
#include "storage/partner_quotas.hpp"
#include "storage/subscribers.hpp"
#include "storage/token_leases.hpp"

namespace surge::engine {

// Which shard a subscriber belongs to, for the whole drain: every message about it goes there.
inline std::size_t shard_of(std::int64_t subscriber_id, std::size_t shard_count) {
  return static_cast<std::size_t>(subscriber_id % static_cast<std::int64_t>(shard_count));
}

// The storage thread's answer to one shard's claim request.
struct claim_reply {
  std::vector<storage::subscriber_demand> asked;
  std::vector<storage::claimed_row> rows;
  // For the entries that asked for tokens, if the cycle ran; empty when it did not.
  std::vector<storage::token_grant> granted;
  // Subscribers that got fewer rows than asked though more are due (storage::cycle_result).
  std::vector<std::int64_t> more_due;
};

// What the storage thread calls on a shard; implementations post onto the shard's own thread.
class shard_endpoint {
 public:
  virtual ~shard_endpoint() = default;
  virtual void on_subscribers(std::vector<storage::subscriber_row> rows) = 0;
  virtual void on_claimed(claim_reply reply) = 0;
  // Rows were queued for these subscribers (all of the shard's when `all`): ask for them now
  // rather than at their next idle poll.
  virtual void on_new_rows(std::vector<std::int64_t> subscriber_ids, bool all) = 0;
  // This drain took these subscribers over from another drain (storage/ownership.hpp): their
  // pacing starts empty, so the previous owner's last sends and ours together stay within the
  // partner's limit, and their rows are asked for now.
  virtual void on_taken(std::vector<std::int64_t> subscriber_ids) = 0;
  // This drain no longer owns these subscribers (storage/ownership.hpp): rows claimed for them
  // and not yet sent go back to the queue, for their new owner to claim at once.
  virtual void on_disowned(std::vector<std::int64_t> subscriber_ids) = 0;
};

// What a shard calls on the storage thread; every call is thread-safe and returns at once.
class storage_endpoint {
 public:
  virtual ~storage_endpoint() = default;
  // Rows and tokens per subscriber that shard `shard` can use soon; answered by on_claimed.
  virtual void request_claims(int shard, std::vector<storage::subscriber_demand> demand) = 0;
  // Outcomes to write, and subscribers to deactivate (410 Gone) with them.
  virtual void submit(std::vector<storage::outcome> outcomes,
                      std::vector<std::int64_t> deactivate) = 0;
  // A finishing shard's leased tokens it did not spend (one call per shard, at its end).
  virtual void submit_unspent(std::vector<storage::unspent_tokens> tokens) = 0;
  // The partners' latest announced quotas: kept per subscriber and written at most once a
  // second (and at the end), for `surge stats`.
  virtual void submit_quotas(std::vector<storage::partner_quota_row> rows) = 0;
};

}  // namespace surge::engine
