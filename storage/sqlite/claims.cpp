#include "storage/sqlite/claims.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <unordered_map>
#include <utility>

#include <SQLiteCpp/Transaction.h>

#include "storage/ordered_claim.hpp"
#include "storage/sqlite/ordered_keys.hpp"
#include "storage/sqlite/sql_support.hpp"

namespace surge::storage::sqlite {
namespace {

// The claim reads the due rows, then leases each by its id, both inside the caller's write
// transaction, so nothing can change between the two. One UPDATE ... WHERE id IN (SELECT ...)
// RETURNING does the same in one statement, but it builds two temporary B-trees (the id list
// and the returned rows, payloads included) per subscriber and claim: 4.0 to 4.6 us of CPU a
// row against 3.2 (BM_storage_claim/100).
//
// ORDER BY ... id makes the choice deterministic among rows due at the same instant, and it is
// the order of idx_delivery_subscriber_due entries, so no sort is needed inside SQLite.
constexpr const char* due_rows_sql =
    "SELECT id, subscriber_id, event_type, "
    "CASE WHEN length(CAST(payload AS BLOB)) > :max_payload THEN '' ELSE payload END, "
    "attempts, next_attempt_at, created_at, length(CAST(payload AS BLOB)), coalesced_since "
    "FROM webhook_delivery WHERE subscriber_id = :sid "
    "AND status IN ('pending','retry') AND next_attempt_at <= :now AND locked_until <= :now "
    "AND id <= :through ORDER BY next_attempt_at, id LIMIT :n";
// The read's conditions again: free for the read means free for the write, and a row that is
// not (nothing else can write meanwhile) is left out rather than leased twice.
constexpr const char* lease_row_sql =
    "UPDATE webhook_delivery SET locked_until = ? WHERE id = ? AND locked_until <= ? "
    "AND status IN ('pending','retry')";
// The same for sixteen rows at once: each execution of the one-row UPDATE costs about as much
// again as its row. `+status` keeps the planner on the rowid: offered the partial due index
// for `status IN (...)`, it scans that index instead of seeking sixteen ids. OR FAIL spares the
// statement journal an ABORT needs to undo a statement: a copy of every page it changes, sixteen
// pages here (BM_storage_claim/1000 was slower than one row at a time with it). What can still
// stop it halfway (an I/O error, another program's trigger raising) throws, and the whole claim
// rolls back with its transaction.
constexpr int rows_per_lease = claimer::rows_per_lease;
std::string lease_rows_sql() {
  return "UPDATE OR FAIL webhook_delivery SET locked_until = ?1 WHERE id IN (" +
         detail::numbered_placeholders(3, rows_per_lease) +
         ") AND locked_until <= ?2 AND +status IN ('pending','retry')";
}
// Which of those rows the write reached, when it reached fewer than all: lease values are unique
// to a claim (storage/lease_values.hpp), so a row holding this one was leased just now.
std::string leased_rows_sql() {
  return "SELECT id FROM webhook_delivery WHERE id IN (" +
         detail::numbered_placeholders(2, rows_per_lease) + ") AND locked_until = ?1";
}

// The sweep: due, free rows in table order within the window, so that a stretch of finished
// rows costs one bounded scan. NOT INDEXED keeps SQLite on the rowid range
// (offered the partial due index for the status test, it would scan that instead).
constexpr const char* sweep_sql =
    "SELECT id, subscriber_id, event_type, "
    "CASE WHEN length(CAST(payload AS BLOB)) > ?1 THEN '' ELSE payload END, "
    "attempts, next_attempt_at, created_at, length(CAST(payload AS BLOB)), coalesced_since "
    "FROM webhook_delivery NOT INDEXED WHERE id >= ?2 AND id < ?3 "
    "AND status IN ('pending','retry') AND next_attempt_at <= ?4 AND locked_until <= ?4 "
    "ORDER BY id";

// Ordered claims read a subscriber's unfinished rows in id order through
// surge_delivery_subscriber_order (storage/sqlite/ordered_keys.cpp), which holds only them.
constexpr const char* ordered_rows_sql =
    "SELECT next_attempt_at <= :now, locked_until <= :now, id, subscriber_id, event_type, "
    "CASE WHEN length(CAST(payload AS BLOB)) > :max_payload THEN '' ELSE payload END, "
    "attempts, next_attempt_at, created_at, length(CAST(payload AS BLOB)), coalesced_since "
    "FROM webhook_delivery WHERE subscriber_id = :sid AND status IN ('pending','retry') "
    "AND id > :after ORDER BY id LIMIT :n";

constexpr const char* release_sql =
    "UPDATE webhook_delivery SET locked_until = 0 WHERE id = ? AND locked_until = ?";

// Who holds a lease, for `surge stats`. OR REPLACE: two processes can (rarely) pick the same
// lease value, and that must not fail a claim.
constexpr const char* record_lease_sql =
    "INSERT OR REPLACE INTO surge_lease(lease, owner, claimed_at) VALUES (?, ?, ?)";
// Any owner's rows: a process that crashed never cleans up after itself, and an hour after its
// lease expired a row names nobody's lease any more.
constexpr const char* prune_leases_sql = "DELETE FROM surge_lease WHERE lease < ?";
constexpr double lease_record_keep_seconds = 3600;
constexpr int claims_between_prunes = 100;

// Every read comes before any lease is written, so a subscriber named twice would have the same
// rows read twice and handed out twice; its entries become one asking for their sum, which is
// what reading after each lease gave.
std::vector<subscriber_demand> one_entry_each(std::span<const subscriber_demand> demand) {
  std::vector<subscriber_demand> merged;
  for (const auto& entry : demand) {
    if (entry.rows <= 0) continue;
    const auto same = std::find_if(merged.begin(), merged.end(), [&](const auto& m) {
      return m.subscriber_id == entry.subscriber_id;
    });
    if (same == merged.end()) {
      merged.push_back(entry);
    } else {
      same->rows += entry.rows;
      if (entry.judged_through) {
        same->judged_through =
            std::min(*entry.judged_through, same->judged_through.value_or(*entry.judged_through));
      }
    }
  }
  return merged;
}

bool names_a_subscriber_twice(std::span<const subscriber_demand> demand) {
  std::vector<std::int64_t> ids;
  ids.reserve(demand.size());
  for (const auto& entry : demand) {
    if (entry.rows > 0) ids.push_back(entry.subscriber_id);
  }
  std::sort(ids.begin(), ids.end());
  return std::adjacent_find(ids.begin(), ids.end()) != ids.end();
}

}  // namespace

const claim_statements& seed000_claim_statements() {
  static const claim_statements statements{
      .due_rows = due_rows_sql,
      .lease_row = lease_row_sql,
      .lease_rows = lease_rows_sql(),
      .leased_rows = leased_rows_sql(),
      .sweep = sweep_sql,
      .release = release_sql,
      .last_id = "SELECT COALESCE(MAX(id), 0) FROM webhook_delivery",
      .ordered_rows = ordered_rows_sql,
      .payload_of = "SELECT payload FROM webhook_delivery WHERE id = ?1",
  };
  return statements;
}

std::string_view claim_statement_text() { return due_rows_sql; }

std::string lease_statement_text() { return lease_rows_sql(); }

claimer::claimer(SQLite::Database& db, std::string owner, const claim_statements& sql)
    : db_(db),
      owner_(std::move(owner)),
      due_rows_statement_(std::make_unique<SQLite::Statement>(db, sql.due_rows)),
      lease_row_statement_(std::make_unique<SQLite::Statement>(db, sql.lease_row)),
      lease_rows_statement_(std::make_unique<SQLite::Statement>(db, sql.lease_rows)),
      leased_rows_statement_(std::make_unique<SQLite::Statement>(db, sql.leased_rows)),
      release_statement_(std::make_unique<SQLite::Statement>(db, sql.release)),
      sweep_statement_(std::make_unique<SQLite::Statement>(db, sql.sweep)),
      last_id_statement_(std::make_unique<SQLite::Statement>(db, sql.last_id)),
      ordered_rows_statement_(std::make_unique<SQLite::Statement>(db, sql.ordered_rows)),
      payload_of_statement_(std::make_unique<SQLite::Statement>(db, sql.payload_of)),
      record_lease_statement_(std::make_unique<SQLite::Statement>(db, record_lease_sql)),
      prune_leases_statement_(std::make_unique<SQLite::Statement>(db, prune_leases_sql)) {}

claimer::~claimer() = default;

std::vector<claimed_row> claimer::claim(std::span<const subscriber_demand> demand, double now,
                                        double lease_seconds, std::int64_t max_payload_bytes) {
  if (std::none_of(demand.begin(), demand.end(), [](const auto& d) { return d.rows > 0; })) {
    return {};
  }
  SQLite::Transaction transaction(db_, SQLite::TransactionBehavior::IMMEDIATE);
  auto rows = claim_within(demand, now, lease_seconds, max_payload_bytes);
  transaction.commit();
  return rows;
}

namespace {

// Fills `row` from a statement whose columns, from `first` on, are due_rows_sql's.
void read_claimed(SQLite::Statement& read, double lease, claimed_row& row, int first = 0) {
  row.id = read.getColumn(first).getInt64();
  row.subscriber_id = read.getColumn(first + 1).getInt64();
  row.event_type = read.getColumn(first + 2).getString();
  row.payload = read.getColumn(first + 3).getString();
  row.attempts = detail::attempts_in_range(read.getColumn(first + 4).getInt64());
  row.next_attempt_at = read.getColumn(first + 5).getDouble();
  row.created_at = read.getColumn(first + 6).getDouble();
  row.payload_bytes = read.getColumn(first + 7).getInt64();
  if (!read.getColumn(first + 8).isNull()) {
    row.coalesced_since = read.getColumn(first + 8).getDouble();
  }
  if (read.getColumnCount() > first + 9) {
    row.stored_signature =
        read.getColumn(first + 9).isNull() ? "" : read.getColumn(first + 9).getString();
  }
  row.lease = lease;
}

}  // namespace

std::vector<claimed_row> claimer::claim_within(std::span<const subscriber_demand> demand,
                                               double now, double lease_seconds,
                                               std::int64_t max_payload_bytes) {
  std::vector<claimed_row> rows;
  if (std::none_of(demand.begin(), demand.end(), [](const auto& d) { return d.rows > 0; })) {
    return rows;
  }
  std::vector<subscriber_demand> merged;
  if (names_a_subscriber_twice(demand)) {
    merged = one_entry_each(demand);
    demand = merged;
  }
  const double lease = make_lease(now, lease_seconds);
  waiting_for_window_.clear();
  // Subscribers with nothing due behind the sweep's cursor take their rows in table order,
  // the others by their own seeks; the sweep's leases are written before the seeks read, so a
  // seek never reads a row the sweep took.
  // Ordered subscribers claim by their own rule, never swept: their rows are read after the
  // sweep's leases, which never take theirs.
  std::vector<subscriber_demand> unordered;
  std::vector<const subscriber_demand*> ordered;
  for (const auto& entry : demand) {
    if (entry.order) ordered.push_back(&entry);
  }
  if (!ordered.empty()) {
    for (const auto& entry : demand) {
      if (!entry.order) unordered.push_back(entry);
    }
    demand = unordered;
  }
  std::vector<subscriber_demand> seeks;
  sweep(demand, now, lease, max_payload_bytes, rows, seeks);
  lease_from(rows, 0, lease, now);
  const std::size_t swept = rows.size();
  for (const auto* entry : ordered) claim_ordered(*entry, now, lease, max_payload_bytes, rows);
  auto& read = *due_rows_statement_;
  const int max_payload_index = read.getIndex(":max_payload");
  const int subscriber_index = read.getIndex(":sid");
  const int now_index = read.getIndex(":now");
  const int through_index = read.getIndex(":through");
  const int limit_index = read.getIndex(":n");
  for (const auto& entry : seeks) {
    const std::size_t first = rows.size();
    {
      // Read to the end and reset before writing the same table.
      sqlite::statement_use use(read);
      read.bind(max_payload_index, max_payload_bytes);
      read.bind(subscriber_index, entry.subscriber_id);
      read.bind(now_index, now);
      read.bind(through_index,
                entry.judged_through.value_or(std::numeric_limits<std::int64_t>::max()));
      read.bind(limit_index, entry.rows);
      while (read.executeStep()) read_claimed(read, lease, rows.emplace_back());
    }
    sweep_.after_seek(entry.subscriber_id, std::span<const claimed_row>(rows).subspan(first), now);
  }
  // Every read is done (the write transaction keeps the rows as read), so the leases are written
  // sixteen at a time across subscribers.
  lease_from(rows, swept, lease, now);
  // Empty claims are frequent (polling subscribers that came back short) and lease nothing.
  if (!rows.empty()) record_lease(lease, now);
  return rows;
}

void claimer::claim_ordered(const subscriber_demand& entry, double now, double lease,
                            std::int64_t max_payload_bytes, std::vector<claimed_row>& rows) {
  if (entry.rows <= 0) return;
  if (!stopped_keys_statement_) {
    stopped_keys_statement_ = std::make_unique<SQLite::Statement>(db_, stopped_keys_of_sql);
  }
  std::set<std::string, std::less<>> stopped;
  {
    sqlite::statement_use use(*stopped_keys_statement_);
    stopped_keys_statement_->bind(1, entry.subscriber_id);
    while (stopped_keys_statement_->executeStep()) {
      stopped.insert(stopped_keys_statement_->getColumn(0).getString());
    }
  }
  const ordered_reader reader{
      .payload_cap = max_payload_bytes,
      .page =
          [&](std::int64_t after, std::int64_t limit, std::vector<unfinished_row>& page) {
            auto& read = *ordered_rows_statement_;
            sqlite::statement_use use(read);
            read.bind(":max_payload", std::min(max_payload_bytes, ordered_page_payload_bytes));
            read.bind(":sid", entry.subscriber_id);
            read.bind(":now", now);
            read.bind(":after", after);
            read.bind(":n", limit);
            while (read.executeStep()) {
              auto& row = page.emplace_back();
              row.due = read.getColumn(0).getInt() != 0;
              row.free = read.getColumn(1).getInt() != 0;
              read_claimed(read, lease, row.row, 2);
            }
          },
      .payload_of =
          [&](std::int64_t id) {
            sqlite::statement_use use(*payload_of_statement_);
            payload_of_statement_->bind(1, id);
            return payload_of_statement_->executeStep()
                       ? payload_of_statement_->getColumn(0).getString()
                       : std::string();
          },
  };
  const auto read_after = stopped_runs_.read_after(entry.subscriber_id, stopped, now);
  auto pick = pick_key_heads(entry, stopped, reader, read_after);
  stopped_runs_.remember(entry.subscriber_id, stopped, read_after, pick.stopped_through, now);
  rows.insert(rows.end(), std::make_move_iterator(pick.rows.begin()),
              std::make_move_iterator(pick.rows.end()));
  if (pick.more_due) waiting_for_window_.push_back(entry.subscriber_id);
}

void claimer::sweep(std::span<const subscriber_demand> demand, double now, double lease,
                    std::int64_t max_payload_bytes, std::vector<claimed_row>& rows,
                    std::vector<subscriber_demand>& seeks) {
  std::unordered_map<std::int64_t, int> wanted;  // what the sweep may take, per subscriber
  int total = 0;
  for (const auto& entry : demand) {
    if (entry.rows <= 0) continue;
    // A coalescing subscriber's bound is an id: its rows are sought below it, never swept.
    if (!entry.judged_through && sweep_.sweeping(entry.subscriber_id, now)) {
      wanted[entry.subscriber_id] = entry.rows;
      total += entry.rows;
    } else {
      seeks.push_back(entry);
    }
  }
  if (total < sweep_cursor::least_rows || wanted.size() < sweep_cursor::least_subscribers) {
    // Too little to be worth a scan: everyone seeks.
    for (const auto& [id, count] : wanted) seeks.push_back({.subscriber_id = id, .rows = count});
    return;
  }
  // A window read whole that gave nothing to anyone asking (finished, leased or other drainers'
  // rows) is followed by the next one in the same claim, a few at most.
  const std::unordered_map<std::int64_t, int> asked(wanted);
  auto outcome = window_outcome::read_whole;
  for (int windows = 0; windows < sweep_cursor::windows_per_claim && total > 0 &&
                        outcome == window_outcome::read_whole;
       ++windows) {
    outcome = sweep_window(wanted, total, now, lease, max_payload_bytes, rows);
  }
  if (outcome == window_outcome::read_whole) {
    // A swept subscriber that found nothing in several whole windows has its rows elsewhere (a
    // producer that wrote them together): it seeks, rather than wait for the window to come.
    for (const auto& [id, count] : wanted) {
      if (count > 0 && count == asked.at(id)) sweep_.fell_behind(id);
    }
  }
  // A swept subscriber waits for the window to move on; it seeks only once it is no longer swept
  // (it held the window back, or every subscriber's periodic seek). Its short answer does not
  // mean it has nothing due, unless the sweep reached the table's end.
  if (outcome == window_outcome::at_table_end) return;
  for (const auto& [id, count] : wanted) {
    if (count > 0) waiting_for_window_.push_back(id);
  }
}

claimer::window_outcome claimer::sweep_window(std::unordered_map<std::int64_t, int>& wanted,
                                              int& total, double now, double lease,
                                              std::int64_t max_payload_bytes,
                                              std::vector<claimed_row>& rows) {
  auto& scan = *sweep_statement_;
  sqlite::statement_use use(scan);
  const auto from = sweep_.cursor();
  // Swept subscribers move through the table together, a window at a time: each takes what it
  // wants of the window and no more, so the rows in flight, and the outcomes written together,
  // stay within a few pages instead of drifting apart by subscriber.
  const auto to = from + sweep_cursor::window_ids(wanted.size());
  const int asked = total;
  scan.bind(1, max_payload_bytes);
  scan.bind(2, from);
  scan.bind(3, to);
  scan.bind(4, now);
  std::int64_t last = from - 1;
  bool stopped = false;
  // The first row of a swept subscriber the sweep leaves (it wants no more now): the cursor
  // stops there, so that subscriber never has a due row behind it.
  std::int64_t left_at = 0;
  std::int64_t left_by = 0;
  while (scan.executeStep()) {
    const std::int64_t id = scan.getColumn(0).getInt64();
    const std::int64_t subscriber = scan.getColumn(1).getInt64();
    last = id;
    auto want = wanted.find(subscriber);
    if (want != wanted.end() && want->second > 0) {
      read_claimed(scan, lease, rows.emplace_back());
      --want->second;
      if (--total == 0) {
        stopped = true;
        break;
      }
    } else if (left_at == 0 && sweep_.sweeping(subscriber, now)) {
      left_at = id;
      left_by = subscriber;
    }
    // A seeking subscriber's rows are its seeks' to find.
  }
  // Past the rows read when the sweep had all it wanted; past the window when it read it all,
  // but never past the table's end, where new rows will come.
  std::int64_t next = stopped ? last + 1 : to;
  if (left_at != 0) next = left_at;
  bool at_end = false;
  if (!stopped && left_at == 0) {
    sqlite::statement_use top(*last_id_statement_);
    if (last_id_statement_->executeStep()) {
      const auto end = last_id_statement_->getColumn(0).getInt64() + 1;
      at_end = next >= end;
      next = std::min(next, end);
    }
  }
  sweep_.advance(next, left_by, now);
  const bool read_whole = !stopped && left_at == 0;
  (void)asked;
  if (at_end) return window_outcome::at_table_end;
  return read_whole ? window_outcome::read_whole : window_outcome::took_all_or_held;
}

void claimer::lease_from(std::vector<claimed_row>& rows, std::size_t first, double lease,
                         double now) {
  std::vector<bool> leased(rows.size() - first, false);
  std::size_t next = first;
  for (; next + rows_per_lease <= rows.size(); next += rows_per_lease) {
    lease_sixteen(rows, next, lease, now, leased, first);
  }
  for (; next < rows.size(); ++next) leased[next - first] = lease_one(rows[next].id, lease, now);
  std::size_t kept = first;
  for (std::size_t i = first; i < rows.size(); ++i) {
    if (!leased[i - first]) continue;
    if (kept != i) rows[kept] = std::move(rows[i]);
    ++kept;
  }
  rows.erase(rows.begin() + static_cast<std::ptrdiff_t>(kept), rows.end());
}

bool claimer::lease_one(std::int64_t id, double lease, double now) {
  auto& write = *lease_row_statement_;
  sqlite::statement_use use(write);
  write.bind(1, lease);
  write.bind(2, id);
  write.bind(3, now);
  return write.exec() == 1;
}

void claimer::lease_sixteen(const std::vector<claimed_row>& rows, std::size_t first, double lease,
                            double now, std::vector<bool>& leased, std::size_t leased_from) {
  {
    auto& write = *lease_rows_statement_;
    sqlite::statement_use use(write);
    write.bind(1, lease);
    write.bind(2, now);
    for (int i = 0; i < rows_per_lease; ++i) write.bind(i + 3, rows[first + i].id);
    if (write.exec() == rows_per_lease) {
      std::fill_n(leased.begin() + static_cast<std::ptrdiff_t>(first - leased_from), rows_per_lease,
                  true);
      return;
    }
  }
  auto& check = *leased_rows_statement_;
  sqlite::statement_use use(check);
  check.bind(1, lease);
  for (int i = 0; i < rows_per_lease; ++i) check.bind(i + 2, rows[first + i].id);
  while (check.executeStep()) {
    const auto id = check.getColumn(0).getInt64();
    for (int i = 0; i < rows_per_lease; ++i) {
      if (rows[first + i].id == id) leased[first + i - leased_from] = true;
    }
  }
}

void claimer::record_lease(double lease, double now) {
  {
    auto& statement = *record_lease_statement_;
    sqlite::statement_use use(statement);
    statement.bind(1, lease);
    statement.bind(2, owner_);
    statement.bind(3, now);
    statement.exec();
  }
  if (claims_until_prune_-- > 0) return;
  claims_until_prune_ = claims_between_prunes - 1;
  auto& statement = *prune_leases_statement_;
  sqlite::statement_use use(statement);
  statement.bind(1, now - lease_record_keep_seconds);
  statement.exec();
}

int claimer::release(std::span<const lease_ref> leases) {
  if (leases.empty()) return 0;
  int released = 0;
  SQLite::Transaction transaction(db_, SQLite::TransactionBehavior::IMMEDIATE);
  auto& statement = *release_statement_;
  for (const auto& lease : leases) {
    sqlite::statement_use use(statement);
    statement.bind(1, lease.delivery_id);
    statement.bind(2, lease.lease);
    released += statement.exec();
  }
  transaction.commit();
  return released;
}

double claimer::make_lease(double now, double seconds) { return leases_.next(now, seconds); }

void sweep_cursor::advance(std::int64_t next, std::int64_t left_by, double now) {
  if (left_by != 0 && next <= cursor_ && left_by == pinned_by_) {
    // The same subscriber has held the cursor back for a while (paused, or slower than the
    // others): it seeks from now on, and the sweep goes on without it.
    if (now - pinned_since_ > pin_seconds) sweeping_.erase(left_by);
  } else {
    pinned_by_ = left_by;
    pinned_since_ = now;
  }
  cursor_ = std::max(cursor_, next);
}

bool sweep_cursor::sweeping(std::int64_t subscriber, double now) const {
  // A row can fall due behind the cursor without the sweep passing it (a retry, a lease that
  // expired, a replay): each subscriber seeks at least once every recheck_seconds.
  const auto found = sweeping_.find(subscriber);
  return found != sweeping_.end() && now - found->second < recheck_seconds && now >= found->second;
}

void sweep_cursor::after_seek(std::int64_t subscriber, std::span<const claimed_row> found,
                              double now) {
  if (found.empty()) {
    sweeping_.erase(subscriber);  // nothing due: it has nothing to sweep either
    return;
  }
  const auto first = std::min_element(found.begin(), found.end(), [](const auto& a, const auto& b) {
                       return a.id < b.id;
                     })->id;
  if (cursor_ == 0) cursor_ = first;  // the sweep starts at the first rows a claim finds
  // Swept only with nothing due behind the cursor and its next rows near it: a subscriber whose
  // rows a producer wrote together, far from the others', would wait for the window to reach
  // them; one behind the cursor (a slow one, a retry) seeks until it has caught up.
  if (first < cursor_ || first >= cursor_ + near_ids) {
    sweeping_.erase(subscriber);
    return;
  }
  sweeping_[subscriber] = now;
}

std::int64_t sweep_cursor::window_ids(std::size_t subscribers) {
  return std::max<std::int64_t>(static_cast<std::int64_t>(subscribers) * window_rows_each,
                                least_window_ids);
}

}  // namespace surge::storage::sqlite
