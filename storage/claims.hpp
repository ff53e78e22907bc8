#pragma once
// Leasing due rows per subscriber, and giving leases back.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "storage/lease_values.hpp"

namespace surge::storage {

struct claimed_row {
  std::int64_t id = 0;
  std::int64_t subscriber_id = 0;
  std::string event_type;
  std::string payload;  // empty when the payload is over the claim's size cap
  std::int64_t payload_bytes = 0;  // the stored payload's size, measured in SQL
  std::int64_t attempts = 0;
  double next_attempt_at = 0;
  double created_at = 0;
  double lease = 0;  // the locked_until value this process wrote: the fence for outcome writes
  // Coalescing: the created_at of the oldest row merged into this one so far, if any.
  std::optional<double> coalesced_since;
};

struct subscriber_demand {
  std::int64_t subscriber_id = 0;
  int rows = 0;
  // Tokens asked of its persisted bucket in the same cycle (storage/token_leases.hpp); 0: none;
  // below 0: leased tokens given back.
  double tokens = 0;
};

struct lease_ref {
  std::int64_t delivery_id = 0;
  double lease = 0;
};

// "surge@<hostname>:<pid>": who holds a lease, as `surge stats` shows it.
std::string default_lease_owner();

class claimer {
 public:
  // Needs schema version 2 (surge_lease). `owner` names this claimer in surge_lease.
  explicit claimer(SQLite::Database& db, std::string owner = default_lease_owner());
  ~claimer();

  // For each demand entry, leases up to `rows` rows of that subscriber that are due
  // (next_attempt_at <= now, status pending or retry) and free (locked_until <= now), oldest due
  // first, all in one BEGIN IMMEDIATE transaction. Rows of one subscriber come out ordered by
  // next_attempt_at. A claim that leased anything also records
  // its lease and owner in surge_lease (one row per call), and every 100 such claims the
  // transaction also drops surge_lease rows more than an hour past their lease.
  // A payload over `max_payload_bytes` is measured in SQL and not read: the row comes back with
  // its size and an empty payload, so what a claim holds in memory is bounded by the cap.
  std::vector<claimed_row> claim(std::span<const subscriber_demand> demand, double now,
                                 double lease_seconds,
                                 std::int64_t max_payload_bytes = no_payload_cap);
  static constexpr std::int64_t no_payload_cap = INT64_MAX;
  // The same inside a write transaction the caller holds (storage/cycle.hpp).
  std::vector<claimed_row> claim_within(std::span<const subscriber_demand> demand, double now,
                                        double lease_seconds, std::int64_t max_payload_bytes);

  // Sets locked_until = 0 on rows still holding our lease; returns how many were released.
  int release(std::span<const lease_ref> leases);

  // A locked_until value for a claim at `now`: now + seconds, made unique to this process and
  // strictly increasing across calls so that a fence never matches another claimer's lease.
  double make_lease(double now, double seconds);

  const std::string& owner() const { return owner_; }

 private:
  void record_lease(double lease, double now);
  // Whether the lease write reached the row (it was still due and free).
  bool lease_one(std::int64_t id, double lease, double now);
  // The same for rows[first .. first + 16), marking each one reached in `leased`.
  void lease_sixteen(const std::vector<claimed_row>& rows, std::size_t first, double lease,
                     double now, std::vector<bool>& leased);

  SQLite::Database& db_;
  std::string owner_;
  std::unique_ptr<SQLite::Statement> due_rows_statement_;
  std::unique_ptr<SQLite::Statement> lease_row_statement_;
  std::unique_ptr<SQLite::Statement> lease_rows_statement_;    // sixteen rows
  std::unique_ptr<SQLite::Statement> leased_rows_statement_;   // which of sixteen it reached
  std::unique_ptr<SQLite::Statement> release_statement_;
  std::unique_ptr<SQLite::Statement> record_lease_statement_;
  std::unique_ptr<SQLite::Statement> prune_leases_statement_;
  int claims_until_prune_ = 0;  // 0: prune in the next claim that leases rows
  lease_values leases_;
};

// The text of the claim's read of due rows, and of its lease write for sixteen rows, for
// checking their query plans.
std::string_view claim_statement_text();
std::string lease_statement_text();

}  // namespace surge::storage
