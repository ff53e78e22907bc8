#pragma once
// The storage core's actions (engine/storage_thread/storage_core.hpp): what the storage thread
// (storage_executor) performs against the queue and the shards, and which result each is answered
// with.
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "engine/handoff.hpp"
#include "storage/claims.hpp"
#include "storage/outcomes.hpp"
#include "storage/partner_quotas.hpp"
#include "storage/token_leases.hpp"

namespace surge::engine {

// What the storage thread is asked to do. Spans point into the core and stay valid until the
// core is next called.
namespace storage_do {
// Ask the database whether other programs queued rows, and wake the shards of those subscribers.
struct check_new_rows {};
// One transaction: `outcomes` (and `deactivate`) written, then `demand` claimed
// (storage::drain_store::write_and_claim); answered by cycle_done or failed.
struct run_cycle {
  std::span<const storage::outcome> outcomes;
  std::span<const std::int64_t> deactivate;
  std::span<const storage::subscriber_demand> demand;
  std::chrono::milliseconds lease;
  std::int64_t max_payload_bytes;
};
// Answered by outcomes_written or failed.
struct write_outcomes {
  std::span<const storage::outcome> outcomes;
  std::span<const std::int64_t> deactivate;
};
// The latest announced quota per subscriber; answered by done or failed.
struct write_quotas {
  std::span<const storage::partner_quota_row> rows;
};
// Look for the queue file if `look_for_file` (queue_lost if it is gone), then ping; answered by
// done or failed.
struct check_database {
  bool look_for_file = true;
};
// Load the subscribers and hand them to the shards; answered by subscribers_loaded or failed.
struct reload_subscribers {
  bool initial = false;
};
// Answered by ownership_renewed or failed.
struct renew_ownership {};
struct release_ownership {};
// Count the due rows of the subscribers --until-drained waits for; answered by backlog_counted.
struct count_backlog {};
// Dead-letter rows of unknown subscribers and rows no claim can match, among them rows held
// further ahead than now + `lease_horizon`, which is no lease anyone takes; answered by swept.
struct sweep_stuck_rows {
  // Unset, no lease is too far: a sweep built without one dead-letters no leased row.
  std::chrono::duration<double> lease_horizon = std::chrono::duration<double>::max();
};
// The rows still due or leased at the end, for the report; answered by remaining_counted.
struct count_remaining {};
// Answered by done or failed.
struct give_back_tokens {
  std::span<const storage::unspent_tokens> tokens;
};
struct answer_shard {
  int shard = 0;
  claim_reply reply;
};
// Tell the shards of these subscribers that this drain took them over (or no longer owns them).
struct tell_owner_change {
  std::vector<std::int64_t> subscribers;
  bool taken = false;
};
// A fault the drain cannot outlast: end it with this cause (exit 1).
struct stop_drain {
  std::string why;
};
// --until-drained found nothing more that can be sent.
struct drained {};
// The storage thread ends: what was left behind.
struct finish {
  std::int64_t remaining = -1;  // rows still due or leased, -1 unknown
  std::int64_t unwritten = 0;   // outcomes given up at the stop's deadline
  double last_lease = 0;        // the latest lease among those (unix seconds)
};
}  // namespace storage_do

using storage_action = std::variant<
    storage_do::check_new_rows, storage_do::run_cycle, storage_do::write_outcomes,
    storage_do::write_quotas, storage_do::check_database, storage_do::reload_subscribers,
    storage_do::renew_ownership, storage_do::release_ownership, storage_do::count_backlog,
    storage_do::sweep_stuck_rows, storage_do::count_remaining, storage_do::give_back_tokens,
    storage_do::answer_shard, storage_do::tell_owner_change, storage_do::stop_drain,
    storage_do::drained, storage_do::finish>;

}  // namespace surge::engine
