#include "storage/sqlite/queue.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include "proto/event_match.hpp"
#include "storage/sqlite/schema.hpp"
#include "storage/sqlite/sql_support.hpp"

namespace surge::storage::sqlite {

std::int64_t emit_event(SQLite::Database& db, std::string_view event_type, std::string_view payload,
                        double now, int count) {
  if (count < 1) throw std::invalid_argument("emit_event: count must be at least 1");
  SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);

  std::vector<std::int64_t> targets;
  {
    SQLite::Statement query(
        db, "SELECT id, event_types FROM webhook_subscriber WHERE active = 1 ORDER BY id");
    while (query.executeStep()) {
      if (proto::event_matches(query.getColumn(1).getText(), event_type)) {
        targets.push_back(query.getColumn(0).getInt64());
      }
    }
  }

  SQLite::Statement insert(
      db,
      "INSERT INTO webhook_delivery(subscriber_id, event_type, payload, status, attempts, "
      "next_attempt_at, locked_until, created_at) VALUES (?, ?, ?, 'pending', 0, ?, 0, ?)");
  // reset() keeps bindings, so only the subscriber changes between rows.
  insert.bind(2, std::string(event_type));
  insert.bind(3, std::string(payload));
  insert.bind(4, now);
  insert.bind(5, now);
  std::int64_t inserted = 0;
  for (const std::int64_t id : targets) {
    insert.bind(1, id);
    for (int copy = 0; copy < count; ++copy) {
      sqlite::statement_use use(insert);
      inserted += insert.exec();
    }
  }
  transaction.commit();
  return inserted;
}

void add_lease_holders(SQLite::Database& db, double now, const proto::id_set& which,
                       const delivery_table& table,
                       std::map<std::int64_t, subscriber_counts>& by_subscriber) {
  const std::string filter = detail::id_filter(which, "d.subscriber_id");
  // A file Surge has not migrated to version 2 yet: no Surge claimer can have leased anything.
  const bool recorded = db.tableExists("surge_lease");
  const std::string owner = recorded ? "COALESCE(l.owner, '" + std::string(lease_owner_other) + "')"
                                     : "'" + std::string(lease_owner_other) + "'";
  const std::string join =
      recorded ? std::string(" LEFT JOIN surge_lease l ON l.lease = d.") + table.lease : "";
  // The outstanding condition lets SQLite walk the due index instead of the whole table
  // (finished rows are never leased). surge_lease has none of the delivery table's columns.
  SQLite::Statement query(db, "SELECT d.subscriber_id, " + owner + ", COUNT(*) FROM " + table.name +
                                  " d" + join + " WHERE " + table.outstanding + " AND NOT (" +
                                  table.free_at(":now") + ") AND " + filter + " GROUP BY 1, 2");
  query.bind(":now", now);
  while (query.executeStep()) {
    const std::int64_t id = query.getColumn(0).getInt64();
    subscriber_counts& counts = by_subscriber[id];
    counts.subscriber_id = id;
    counts.leased_by[query.getColumn(1).getString()] += query.getColumn(2).getInt64();
  }
}

queue_stats read_stats(SQLite::Database& db, double now, const proto::id_set& which) {
  // A read transaction: both queries see one snapshot, so leased_by adds up to leased.
  SQLite::Transaction snapshot(db, SQLite::TransactionBehavior::DEFERRED);
  // One pass over the table, grouped by (subscriber, status); done and dead rows have to be read
  // anyway to be counted, so the due/leased figures ride along instead of taking a second query.
  SQLite::Statement query(
      db, std::string("SELECT subscriber_id, status, COUNT(*), SUM(next_attempt_at <= :now), "
                      "SUM(locked_until > :now), MIN(MAX(next_attempt_at, created_at)), ") +
              (schema_version(db) >= 3 ? "SUM(coalesced_into IS NOT NULL)" : "0") +
              " FROM webhook_delivery WHERE " + detail::id_filter(which, "subscriber_id") +
              " GROUP BY subscriber_id, status");
  query.bind(":now", now);

  std::map<std::int64_t, subscriber_counts> by_subscriber;
  while (query.executeStep()) {
    const std::int64_t id = query.getColumn(0).getInt64();
    const std::string status = query.getColumn(1).getString();
    const std::int64_t rows = query.getColumn(2).getInt64();
    subscriber_counts& counts = by_subscriber[id];
    counts.subscriber_id = id;
    if (status == "done") {
      counts.done += rows;
      counts.coalesced += query.getColumn(6).getInt64();
    } else if (status == "dead") {
      counts.dead += rows;
    } else if (status == "pending" || status == "retry") {
      (status == "pending" ? counts.pending : counts.retry) += rows;
      counts.due_now += query.getColumn(3).getInt64();
      counts.leased += query.getColumn(4).getInt64();
      // A row is as old as the later of when it was queued and when it fell due: producers
      // queue rows with next_attempt_at = 0 (the schema's default), which is not 56 years late.
      counts.oldest_due_age = std::max(counts.oldest_due_age, now - query.getColumn(5).getDouble());
    }
  }

  add_lease_holders(db, now, which, seed000_deliveries(), by_subscriber);
  snapshot.commit();

  return with_totals(by_subscriber);
}

std::int64_t count_outstanding(SQLite::Database& db, double now, const proto::id_set& which,
                               const delivery_table& table) {
  // Due rows (leased or not) plus held rows not yet due, counted apart: the first count reads
  // only the due index, where `due OR held` made SQLite visit every pending row's table record
  // for its lease (27 against 18 ms on 200,000 due rows, a count --until-drained repeats every
  // 2 s on the storage thread).
  const std::string filter = detail::id_filter(which, "subscriber_id");
  const std::string outstanding = std::string("SELECT COUNT(*) FROM ") + table.name + " WHERE " +
                                  table.outstanding + " AND " + table.next_attempt;
  SQLite::Statement query(db, "SELECT (" + outstanding + " <= :now AND " + filter + ") + (" +
                                  outstanding + " > :now AND NOT (" + table.free_at(":now") +
                                  ") AND " + filter + ")");
  query.bind(":now", now);
  query.executeStep();
  return query.getColumn(0).getInt64();
}

}  // namespace surge::storage::sqlite
