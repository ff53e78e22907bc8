#pragma once
// Leasing due rows per subscriber on a SQLite queue, and giving leases back.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "storage/claims.hpp"
#include "storage/lease_values.hpp"
#include "storage/ordered_claim.hpp"

namespace surge::storage::sqlite {

// Where the claim's sweep stands (claimer::claim_within). A fan-out producer writes one row per
// subscriber per event, so a subscriber's rows are spread over the whole table, one per page or
// so. Claimed one subscriber at a time, a page's rows are leased and finished in as many
// transactions as it holds subscribers, each writing the page to the WAL again, and the
// subscribers drift apart, so the rows finished together lie on ever more pages. The sweep takes
// due rows in table order from a cursor, a window at a time, for every subscriber whose next
// rows lie near it: they move through the table together, and a page's rows are leased, sent
// and finished together.
// A subscriber is swept only while nothing of it that is due lies behind the cursor, so each
// still gets its oldest rows first: the cursor stops at the first row of a swept subscriber the
// sweep leaves (it asked for none then), and one that holds it back for long seeks instead.
class sweep_cursor {
 public:
  // Below these a claim seeks for everyone: a sweep has a fixed cost of its own.
  static constexpr int least_rows = 32;
  static constexpr std::size_t least_subscribers = 4;
  // The window the swept subscribers move through together: this many ids per swept
  // subscriber asking, and never fewer than least_window_ids.
  static constexpr std::int64_t window_rows_each = 8;
  static constexpr std::int64_t least_window_ids = 512;
  // How far from the cursor a subscriber's next row may lie for it to be swept.
  static constexpr std::int64_t near_ids = 4096;
  // Windows one claim reads at most while rows are still wanted.
  static constexpr int windows_per_claim = 4;
  // How often each swept subscriber seeks once anyway, for rows due behind the cursor.
  static constexpr double recheck_seconds = 1.0;
  // How long one subscriber may hold the cursor back before it seeks instead.
  static constexpr double pin_seconds = 0.1;

  bool sweeping(std::int64_t subscriber, double now) const;
  std::int64_t cursor() const { return cursor_; }
  // Moves the cursor to `next`; `left_by` is the swept subscriber whose row stopped it there (0:
  // none).
  void advance(std::int64_t next, std::int64_t left_by, double now);
  void fell_behind(std::int64_t subscriber) { sweeping_.erase(subscriber); }
  // A seek for `subscriber` found `found` (oldest due first): whether it is swept from now on.
  void after_seek(std::int64_t subscriber, std::span<const claimed_row> found, double now);
  // The id range one sweep may cover, for `subscribers` swept subscribers asking.
  static std::int64_t window_ids(std::size_t subscribers);

 private:
  std::int64_t cursor_ = 0;                            // 0: not placed yet
  std::unordered_map<std::int64_t, double> sweeping_;  // swept subscribers, since when
  std::int64_t pinned_by_ = 0;  // who stopped the cursor last time, since when
  double pinned_since_ = 0;
};

// The statements a claimer runs: one set per queue shape (seed000's below, seed001's in
// storage/seed001/queue_shape.cpp), so the claim's rules (the sweep, leases by id sixteen at a
// time, the fence) have one home. Every read returns, in this order: id, subscriber_id, event_type,
// the payload ('' when over the cap), attempts, next_attempt_at, created_at, the payload's size,
// coalesced_since, and optionally the stored signature; "free" and "due" mean what the shape's
// other drainers take them to mean.
struct claim_statements {
  std::string due_rows;     // :max_payload, :sid, :now, :through, :n; oldest due first
  std::string lease_row;    // lease, id, now
  std::string lease_rows;   // ?1 lease, ?2 now, ?3 .. ?18 the ids (rows_per_lease)
  std::string leased_rows;  // ?1 lease, ?2 .. ?17 the ids: which of them hold the lease
  std::string sweep;        // ?1 max_payload, ?2 first id, ?3 end id, ?4 now; in id order
  std::string release;      // id, lease
  std::string last_id;      // the table's highest id
  // An ordered subscriber's unfinished rows in id order (proto/ordered_delivery.hpp): first
  // whether each is due, and free, then the columns above. :max_payload, :sid, :now, :after (the
  // id to read past), :n.
  std::string ordered_rows;
  std::string payload_of;  // ?1 id: the whole payload, for the key of a row over the cap
};
const claim_statements& seed000_claim_statements();

class claimer {
 public:
  // Rows one lease write takes (claim_statements::lease_rows).
  static constexpr int rows_per_lease = 16;

  // Needs schema version 2 (surge_lease). `owner` names this claimer in surge_lease.
  explicit claimer(SQLite::Database& db, std::string owner = default_lease_owner(),
                   const claim_statements& statements = seed000_claim_statements());
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
  // The same inside a write transaction the caller holds (storage/sqlite/cycle.hpp).
  std::vector<claimed_row> claim_within(std::span<const subscriber_demand> demand, double now,
                                        double lease_seconds, std::int64_t max_payload_bytes);

  // Sets locked_until = 0 on rows still holding our lease; returns how many were released.
  int release(std::span<const lease_ref> leases);

  // A locked_until value for a claim at `now`: now + seconds, made unique to this process and
  // strictly increasing across calls so that a fence never matches another claimer's lease.
  double make_lease(double now, double seconds);

  const std::string& owner() const { return owner_; }
  // After a claim: the subscribers it gave fewer rows than asked although more are due (they
  // wait for the sweep's window to move on, or an ordered key for its row in flight).
  const std::vector<std::int64_t>& waiting_for_window() const { return waiting_for_window_; }

 private:
  void record_lease(double lease, double now);
  // Whether the lease write reached the row (it was still due and free).
  bool lease_one(std::int64_t id, double lease, double now);
  // The same for rows[first .. first + 16), marking each one reached in `leased` (which starts
  // at rows[leased_from]).
  void lease_sixteen(const std::vector<claimed_row>& rows, std::size_t first, double lease,
                     double now, std::vector<bool>& leased, std::size_t leased_from);
  // Writes the leases of rows[first ..] and drops those a write did not reach.
  void lease_from(std::vector<claimed_row>& rows, std::size_t first, double lease, double now);
  // Reads an ordered subscriber's unfinished rows from its first on, and takes the first row of
  // each key that may go (storage/ordered_claim.hpp), up to the rows it asks for.
  void claim_ordered(const subscriber_demand& entry, double now, double lease,
                     std::int64_t max_payload_bytes, std::vector<claimed_row>& rows);
  // Takes rows in table order for the subscribers that may be swept; the others go to `seeks`.
  void sweep(std::span<const subscriber_demand> demand, double now, double lease,
             std::int64_t max_payload_bytes, std::vector<claimed_row>& rows,
             std::vector<subscriber_demand>& seeks);
  // One window of the sweep: takes from `wanted` (rows still wanted per swept subscriber,
  // `total` in all).
  enum class window_outcome {
    took_all_or_held,  // it took all that was asked, or a swept subscriber's row held it back
    read_whole,        // read to its end with rows still wanted: the next window may have them
    at_table_end,      // the sweep reached the table's last row
  };
  window_outcome sweep_window(std::unordered_map<std::int64_t, int>& wanted, int& total, double now,
                              double lease, std::int64_t max_payload_bytes,
                              std::vector<claimed_row>& rows);

  SQLite::Database& db_;
  std::string owner_;
  std::unique_ptr<SQLite::Statement> due_rows_statement_;
  std::unique_ptr<SQLite::Statement> lease_row_statement_;
  std::unique_ptr<SQLite::Statement> lease_rows_statement_;   // sixteen rows
  std::unique_ptr<SQLite::Statement> leased_rows_statement_;  // which of sixteen it reached
  std::unique_ptr<SQLite::Statement> release_statement_;
  std::unique_ptr<SQLite::Statement> sweep_statement_;
  std::unique_ptr<SQLite::Statement> last_id_statement_;
  std::unique_ptr<SQLite::Statement> ordered_rows_statement_;
  std::unique_ptr<SQLite::Statement> payload_of_statement_;
  std::unique_ptr<SQLite::Statement> stopped_keys_statement_;  // prepared on first use
  stopped_runs stopped_runs_;
  sweep_cursor sweep_;
  std::vector<std::int64_t> waiting_for_window_;
  std::unique_ptr<SQLite::Statement> record_lease_statement_;
  std::unique_ptr<SQLite::Statement> prune_leases_statement_;
  int claims_until_prune_ = 0;  // 0: prune in the next claim that leases rows
  lease_values leases_;
};

// The text of the claim's read of due rows, and of its lease write for sixteen rows, for
// checking their query plans.
std::string_view claim_statement_text();
std::string lease_statement_text();

}  // namespace surge::storage::sqlite
