// seed001's producer side, its statistics and its dead letters, as storage/seed001/queue.hpp maps
// them onto the neutral rows.
#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include "proto/event_match.hpp"
#include "proto/signing.hpp"
#include "storage/seed001/queue.hpp"
#include "storage/seed001/sql.hpp"
#include "storage/sqlite/delivery_table.hpp"
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
      sqlite::statement_use use(insert);
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
  add_lease_holders(db, now, which, seed001_deliveries(), by_subscriber);
  snapshot.commit();
  return with_totals(by_subscriber);
}

}  // namespace surge::storage::sqlite::seed001

namespace surge::storage::sqlite {

const delivery_table& seed001_deliveries() {
  static const delivery_table table{
      .name = "webhook_deliveries",
      .subscriber_table = "webhook_subscribers",
      .status = "state",
      .outstanding = "state = 'pending'",
      .pending = "state = 'pending'",
      .attempts = "attempt",
      .lease = "leased_until",
      .next_attempt = "next_attempt",
      .created = "enqueued_at",
      .whole_seconds = true,
      .due_index = seed001::due_index,
      .free_at = seed001::free_at,
      .dead = "state = 'dead'",
      .last_error = nullptr,
      .note = seed001::note_sql,
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
