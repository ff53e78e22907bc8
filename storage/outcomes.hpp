#pragma once
// Delivery outcomes as the drain hands them to its storage, whichever database holds the queue:
// each backend writes them batched and fenced on our lease (storage/sqlite/outcomes.hpp,
// storage/postgres/outcomes.hpp).
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "storage/ordered_keys.hpp"

namespace surge::storage {

// One row of surge_attempt, for auditing.
struct attempt_record {
  std::int64_t delivery_id = 0;
  std::int64_t subscriber_id = 0;
  std::int64_t attempt = 0;  // 1-based number of this attempt
  double started_at = 0;
  double finished_at = 0;
  int status_code = 0;      // 0 when no response
  std::string error_class;  // empty on a response
  // A batch POST records one attempt per row: each names the batch's first row and its size,
  // so the audit counts POSTs (what a partner's limit counts) apart from rows.
  std::int64_t batch_lead = 0;  // 0: sent alone
  std::int64_t batch_size = 1;
};

enum class outcome_kind {
  done,       // status done, delivered_at set
  retry,      // status retry, next_attempt_at set
  dead,       // status dead
  release,    // nothing about the row changes but the lease (unsent at shutdown)
  coalesced,  // status done without being sent: `coalesced_into` was sent in its place
};

struct outcome {
  std::int64_t delivery_id = 0;
  double lease = 0;  // the fence: written only while locked_until still equals this
  outcome_kind kind = outcome_kind::done;
  std::int64_t attempts = 0;        // new attempts value (done/retry/dead)
  double next_attempt_at = 0;       // retry
  int last_status = 0;              // 0: no response
  std::string last_error;           // reason text; empty on success
  double finished_at = 0;           // delivered_at for done
  std::int64_t coalesced_into = 0;  // coalesced: the row sent instead
  // coalesced: the created_at of the oldest row this one stood for; the row sent instead takes
  // it on (coalesced_since), so the window counts along the chain.
  double coalesced_since = 0;
  bool has_attempt = false;  // whether `attempt` is to be recorded
  attempt_record attempt;
  // An ordered subscriber's row whose death stops its key: the key, written to surge_stopped_key
  // with a dead outcome (stopped_at: when written) and ignored with any other.
  std::optional<stopped_key> stops_key;
  // An ordered subscriber's row that finished (done, dead or coalesced) while nothing else of
  // the subscriber waited to be sent: its key's next row can be claimed only once this is
  // written, so the drain writes it with the next claim.
  bool frees_key = false;
};

struct write_report {
  int applied = 0;
  std::vector<std::int64_t> lost_leases;  // delivery ids whose fence matched nothing
  // Of those, the rows no longer in the queue at all (deleted while in flight).
  std::vector<std::int64_t> deleted;
  // Outcomes not written because another database session holds the row's lock (PostgreSQL):
  // the caller keeps them for a later batch; their attempt records are not written either.
  std::vector<std::int64_t> held_rows;
  // Subscribers of `deactivate` not written for the same reason.
  std::vector<std::int64_t> held_subscribers;
  // Ordered keys a dead row stopped in this write (not those stopped already).
  std::vector<stopped_key> keys_stopped;
};

}  // namespace surge::storage
