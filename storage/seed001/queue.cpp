// seed001's producer side, its statistics and its dead letters, as storage/seed001/queue.hpp maps
// them onto the neutral rows.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include "proto/event_match.hpp"
#include "proto/signing.hpp"
#include "storage/seed001/queue.hpp"
#include "storage/seed001/sql.hpp"
#include "storage/sqlite/delivery_table.hpp"
#include "storage/sqlite/dead_letters.hpp"
#include "storage/sqlite/sql_support.hpp"

namespace surge::storage::sqlite::seed001 {
namespace {

std::int64_t whole_seconds(double unix_seconds) {
  return static_cast<std::int64_t>(std::floor(unix_seconds));
}

}  // namespace

std::int64_t emit_event(SQLite::Database& db, std::string_view event_type, std::string_view payload,
                        double now, int count) {
  if (count < 1) throw std::invalid_argument("emit_event: count must be at least 1");
  SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
  struct target {
    std::int64_t id;
    std::string signature;
  };
  std::vector<target> targets;
  {
    SQLite::Statement query(
        db, "SELECT id, secret, events FROM webhook_subscribers WHERE active = 1 ORDER BY id");
    while (query.executeStep()) {
      if (!proto::event_array_matches(query.getColumn(2).getString(), event_type)) continue;
      // As the shape's producer does: the signature is made once, at enqueue, and every
      // attempt sends it as it is.
      targets.push_back({query.getColumn(0).getInt64(),
                         proto::stored_signature_for(query.getColumn(1).getString(), payload)});
    }
  }
  SQLite::Statement insert(
      db,
      "INSERT INTO webhook_deliveries(subscriber_id, event_type, payload, signature, enqueued_at, "
      "attempt, next_attempt, leased_until, state) VALUES (?, ?, ?, ?, ?, 0, ?, 0, 'pending')");
  const auto at = whole_seconds(now);
  insert.bind(2, std::string(event_type));
  // The exact bytes, as a BLOB like the shape's producer stores them.
  insert.bind(3, payload.data(), static_cast<int>(payload.size()));
  insert.bind(5, at);
  insert.bind(6, at);
  std::int64_t inserted = 0;
  for (const auto& row : targets) {
    insert.bind(1, row.id);
    insert.bind(4, row.signature);
    for (int copy = 0; copy < count; ++copy) {
      detail::statement_use use(insert);
      inserted += insert.exec();
    }
  }
  transaction.commit();
  return inserted;
}

queue_stats read_stats(SQLite::Database& db, double now, const proto::id_set& which) {
  SQLite::Transaction snapshot(db, SQLite::TransactionBehavior::DEFERRED);
  // A pending row with attempts behind it is what seed000 calls a retry.
  SQLite::Statement query(
      db,
      "SELECT subscriber_id, state, attempt > 0, COUNT(*), SUM(next_attempt <= :now), "
      "SUM(" +
          held_at(":now") +
          "), MIN(MAX(next_attempt, enqueued_at)) "
          "FROM webhook_deliveries WHERE " +
          detail::id_filter(which, "subscriber_id") + " GROUP BY 1, 2, 3");
  query.bind(":now", now);
  std::map<std::int64_t, subscriber_counts> by_subscriber;
  while (query.executeStep()) {
    const std::int64_t id = query.getColumn(0).getInt64();
    const std::string state = query.getColumn(1).getString();
    const std::int64_t rows = query.getColumn(3).getInt64();
    subscriber_counts& counts = by_subscriber[id];
    counts.subscriber_id = id;
    if (state == "delivered") {
      counts.done += rows;
    } else if (state == "dead") {
      counts.dead += rows;
    } else if (state == "pending") {
      (query.getColumn(2).getInt() != 0 ? counts.retry : counts.pending) += rows;
      counts.due_now += query.getColumn(4).getInt64();
      counts.leased += query.getColumn(5).getInt64();
      counts.oldest_due_age = std::max(counts.oldest_due_age, now - query.getColumn(6).getDouble());
    }
  }
  // The holders of leased rows: a lease a Surge claim recorded, or anyone else's (the worker's).
  const bool recorded = db.tableExists("surge_lease");
  const std::string owner = recorded ? "COALESCE(l.owner, '" + std::string(lease_owner_other) + "')"
                                     : "'" + std::string(lease_owner_other) + "'";
  SQLite::Statement holders(
      db, "SELECT d.subscriber_id, " + owner + ", COUNT(*) FROM webhook_deliveries d" +
              (recorded ? " LEFT JOIN surge_lease l ON l.lease = d.leased_until" : "") +
              " WHERE d.state = 'pending' AND d." + held_at(":now") + " AND " +
              detail::id_filter(which, "d.subscriber_id") + " GROUP BY 1, 2");
  holders.bind(":now", now);
  while (holders.executeStep()) {
    const std::int64_t id = holders.getColumn(0).getInt64();
    subscriber_counts& counts = by_subscriber[id];
    counts.subscriber_id = id;
    counts.leased_by[holders.getColumn(1).getString()] += holders.getColumn(2).getInt64();
  }
  snapshot.commit();
  return with_totals(by_subscriber);
}

std::int64_t count_outstanding(SQLite::Database& db, double now, const proto::id_set& which) {
  // Due rows, then held rows not yet due, counted apart as on seed000 (the first count reads
  // only the index).
  const std::string filter = detail::id_filter(which, "subscriber_id");
  SQLite::Statement query(db,
                          "SELECT (SELECT COUNT(*) FROM webhook_deliveries WHERE state = 'pending' "
                          "AND next_attempt <= :now AND " +
                              filter +
                              ") + "
                              "(SELECT COUNT(*) FROM webhook_deliveries WHERE state = 'pending' "
                              "AND next_attempt > :now AND " +
                              held_at(":now") + " AND " + filter + ")");
  query.bind(":now", now);
  query.executeStep();
  return query.getColumn(0).getInt64();
}

namespace {

// Shared by list and replay; binds :since when set. One scan of the table, like seed000's.
std::string dead_selection_sql(const dead_selection& which) {
  std::string sql = "d.state = 'dead' AND " +
                    detail::id_filter(which.subscribers, "d.subscriber_id") + " AND " +
                    detail::id_filter(which.ids, "d.id");
  if (which.created_since) sql += " AND d.enqueued_at >= :since";
  return sql;
}

void bind_selection(SQLite::Statement& statement, const dead_selection& which) {
  if (which.created_since) statement.bind(":since", *which.created_since);
  if (which.limit) statement.bind(":limit", *which.limit);
}

std::string newest_first(const dead_selection& which) {
  return std::string(" ORDER BY d.enqueued_at DESC, d.id DESC") +
         (which.limit ? " LIMIT :limit" : "");
}

}  // namespace

std::vector<dead_row> list_dead(SQLite::Database& db, const dead_selection& which) {
  SQLite::Statement query(
      db,
      "SELECT d.id, d.subscriber_id, d.event_type, d.attempt, n.last_status, n.last_error, "
      "d.enqueued_at FROM webhook_deliveries d "
      "LEFT JOIN surge_delivery_note n ON n.delivery_id = d.id WHERE " +
          dead_selection_sql(which) + newest_first(which));
  bind_selection(query, which);
  std::vector<dead_row> rows;
  while (query.executeStep()) {
    dead_row& row = rows.emplace_back();
    row.id = query.getColumn(0).getInt64();
    row.subscriber_id = query.getColumn(1).getInt64();
    row.event_type = query.getColumn(2).getString();
    row.attempts = query.getColumn(3).getInt64();
    row.last_status = query.getColumn(4).isNull() ? 0 : query.getColumn(4).getInt();
    row.last_error = query.getColumn(5).isNull() ? "" : query.getColumn(5).getString();
    row.created_at = query.getColumn(6).getDouble();
  }
  return rows;
}

replay_report replay_dead(SQLite::Database& db, const dead_selection& which, double now) {
  // As on seed000: a fresh retry window (enqueued_at), since the worker and Surge both measure
  // the 24 hours from it. The signature stays: it covers the payload, which does not change.
  const std::string where = which.limit ? "id IN (SELECT d.id FROM webhook_deliveries d WHERE " +
                                              dead_selection_sql(which) + newest_first(which) + ")"
                                        : "id IN (SELECT d.id FROM webhook_deliveries d WHERE " +
                                              dead_selection_sql(which) + ")";
  replay_report report;
  SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
  std::set<std::int64_t> subscribers;
  std::vector<std::int64_t> replayed;
  {
    SQLite::Statement update(db,
                             "UPDATE webhook_deliveries SET state = 'pending', attempt = 0, "
                             "next_attempt = :at, leased_until = 0, enqueued_at = :at WHERE " +
                                 where + " RETURNING subscriber_id, id");
    update.bind(":at", whole_seconds(now));
    bind_selection(update, which);
    while (update.executeStep()) {
      ++report.replayed;
      subscribers.insert(update.getColumn(0).getInt64());
      replayed.push_back(update.getColumn(1).getInt64());
    }
  }
  resume_keys_stopped_by(db, replayed);
  SQLite::Statement active(db, "SELECT active FROM webhook_subscribers WHERE id = ?");
  for (const std::int64_t id : subscribers) {
    detail::statement_use use(active);
    active.bind(1, id);
    if (!active.executeStep() || active.getColumn(0).getInt() == 0) {
      report.inactive_subscribers.push_back(id);
    }
  }
  transaction.commit();
  return report;
}

std::optional<delivery_detail> find_delivery(SQLite::Database& db, std::int64_t id) {
  // The shape keeps no last status or error: Surge's note beside the row does.
  const bool attempts = db.tableExists("surge_attempt");
  const bool notes = db.tableExists("surge_delivery_note");
  SQLite::Statement query(
      db, std::string("SELECT d.id, d.subscriber_id, d.event_type, d.state, d.attempt, ") +
              (notes ? "n.last_status, n.last_error" : "NULL, NULL") + ", d.enqueued_at, " +
              (attempts ? "(SELECT MAX(finished_at) FROM surge_attempt WHERE delivery_id = d.id)"
                        : "NULL") +
              ", d.payload FROM webhook_deliveries d " +
              (notes ? "LEFT JOIN surge_delivery_note n ON n.delivery_id = d.id " : "") +
              "WHERE d.id = ?");
  query.bind(1, id);
  if (!query.executeStep()) return std::nullopt;
  return delivery_detail_from(query);
}

}  // namespace surge::storage::sqlite::seed001

namespace surge::storage::sqlite {

const delivery_table& seed001_deliveries() {
  static const delivery_table table{
      .name = "webhook_deliveries",
      .subscriber_table = "webhook_subscribers",
      .outstanding = "state = 'pending'",
      .lease = "leased_until",
      .next_attempt = "next_attempt",
      .created = "enqueued_at",
      .due_index = seed001::due_index,
      .free_at = seed001::free_at,
      .done = "state = 'delivered'",
      .done_or_dead = "state IN ('delivered', 'dead')",
      // The shape records no delivery time: a finished row is judged by when it was queued, and
      // no row is attempted more than a day after that.
      .finished_at = "enqueued_at",
      .notes = "surge_delivery_note",
      .load_subscribers = seed001::load_subscribers,
  };
  return table;
}

}  // namespace surge::storage::sqlite
