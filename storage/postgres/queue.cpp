#include "storage/postgres/queue.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "proto/event_match.hpp"
#include "storage/ownership_support.hpp"
#include "storage/sql_support.hpp"

namespace surge::storage::pg {
namespace {

constexpr const char* base_columns =
    "SELECT id, url, secret, event_types, rate_per_sec, burst, tokens, tokens_updated_at, "
    "active, signing, max_in_flight, batch_max, batch_bytes, batch_linger, coalesce_key, "
    "coalesce_window, coalesce_events";

// With Surge's credentials once the queue is migrated that far (`subscriber list` may read one
// that is not).
std::string subscriber_columns(session& db) {
  const auto found = db.exec(
      "SELECT to_regclass('surge_subscriber_credential') IS NOT NULL, EXISTS (SELECT 1 FROM "
      "pg_attribute WHERE attrelid = to_regclass('surge_subscriber_credential') AND attname = "
      "'proxy' AND NOT attisdropped)");
  if (found.text(0, 0) != "t") return std::string(base_columns) + " FROM webhook_subscriber ";
  return std::string(base_columns) + detail::credential_columns(found.text(0, 1) == "t") +
         " FROM webhook_subscriber" + detail::credential_join("webhook_subscriber.id");
}

subscriber_row read_subscriber(const result& rows, int i) {
  subscriber_row row;
  row.id = rows.int64(i, 0);
  row.url = rows.text(i, 1);
  row.secret = rows.text(i, 2);
  row.event_types = rows.text(i, 3);
  // Typed columns: unlike SQLite, PostgreSQL cannot hold text in rate_per_sec or burst.
  row.rate_per_sec = rows.real(i, 4);
  row.burst = rows.int64(i, 5);
  row.tokens = rows.real(i, 6);
  row.tokens_updated_at = rows.real(i, 7);
  row.active = rows.int64(i, 8) != 0;
  row.signing = rows.text(i, 9);
  row.max_in_flight = rows.int64(i, 10);
  row.batch_max = rows.int64(i, 11);
  row.batch_bytes = rows.int64(i, 12);
  row.batch_linger = rows.real(i, 13);
  row.coalesce_key = rows.text(i, 14);
  row.coalesce_window = rows.real(i, 15);
  row.coalesce_events = rows.text(i, 16);
  if (rows.columns() > 17) {
    row.extra_headers = proto::decode_header_fields(rows.text(i, 17));
    row.client_cert_file = rows.text(i, 18);
    row.client_key_file = rows.text(i, 19);
    row.proxy = rows.text(i, 20);
  }
  return row;
}

params& add_settings(params& values, const subscriber_row& row) {
  return values.add(row.url)
      .add(row.secret)
      .add(row.event_types)
      .add(row.rate_per_sec)
      .add(row.burst)
      .add(row.active ? 1 : 0)
      .add(row.signing)
      .add(row.max_in_flight)
      .add(row.batch_max)
      .add(row.batch_bytes)
      .add(row.batch_linger)
      .add(row.coalesce_key)
      .add(row.coalesce_window)
      .add(row.coalesce_events);
}

}  // namespace

std::int64_t emit_event(session& db, std::string_view event_type, std::string_view payload,
                        double now, int count) {
  if (count < 1) throw std::invalid_argument("emit_event: count must be at least 1");
  transaction step(db);
  std::vector<std::int64_t> targets;
  const auto subscribers =
      db.exec("SELECT id, event_types FROM webhook_subscriber WHERE active = 1 ORDER BY id");
  for (int i = 0; i < subscribers.rows(); ++i) {
    if (proto::event_matches(subscribers.text(i, 1), event_type)) {
      targets.push_back(subscribers.int64(i, 0));
    }
  }
  // One statement for every row: the subscribers as an array, each repeated `count` times.
  const auto inserted =
      db.exec(
            "INSERT INTO webhook_delivery(subscriber_id, event_type, payload, status, "
            "attempts, next_attempt_at, locked_until, created_at) "
            "SELECT s, $2, $3, 'pending', 0, $4, 0, $4 FROM unnest($1::bigint[]) AS s, "
            "generate_series(1, $5) ORDER BY s",
            params().add_array(targets).add(event_type).add(payload).add(now).add(count))
          .affected();
  step.commit();
  return inserted;
}

queue_stats read_stats(session& db, double now, const proto::id_set& which) {
  // One snapshot for both queries, so leased_by adds up to leased.
  transaction snapshot(db, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  const auto counts = db.exec(
      "SELECT subscriber_id, status, COUNT(*), COUNT(*) FILTER (WHERE next_attempt_at <= $1), "
      "COUNT(*) FILTER (WHERE locked_until > $1), MIN(GREATEST(next_attempt_at, created_at)), "
      "COUNT(coalesced_into) FROM webhook_delivery WHERE " +
          detail::id_filter(which, "subscriber_id") + " GROUP BY subscriber_id, status",
      params().add(now));
  std::map<std::int64_t, subscriber_counts> by_subscriber;
  for (int i = 0; i < counts.rows(); ++i) {
    const auto id = counts.int64(i, 0);
    const auto status = counts.text(i, 1);
    const auto rows = counts.int64(i, 2);
    auto& entry = by_subscriber[id];
    entry.subscriber_id = id;
    if (status == "done") {
      entry.done += rows;
      entry.coalesced += counts.int64(i, 6);
    } else if (status == "dead") {
      entry.dead += rows;
    } else if (status == "pending" || status == "retry") {
      (status == "pending" ? entry.pending : entry.retry) += rows;
      entry.due_now += counts.int64(i, 3);
      entry.leased += counts.int64(i, 4);
      entry.oldest_due_age = std::max(entry.oldest_due_age, now - counts.real(i, 5));
    }
  }
  const auto holders = db.exec(
      "SELECT d.subscriber_id, COALESCE(l.owner, $2), COUNT(*) FROM webhook_delivery d "
      "LEFT JOIN surge_lease l ON l.lease = d.locked_until "
      "WHERE d.status IN ('pending','retry') AND d.locked_until > $1 AND " +
          detail::id_filter(which, "d.subscriber_id") + " GROUP BY 1, 2",
      params().add(now).add(lease_owner_other));
  for (int i = 0; i < holders.rows(); ++i) {
    auto& entry = by_subscriber[holders.int64(i, 0)];
    entry.subscriber_id = holders.int64(i, 0);
    entry.leased_by[std::string(holders.text(i, 1))] += holders.int64(i, 2);
  }
  snapshot.commit();

  return with_totals(by_subscriber);
}

std::int64_t count_outstanding(session& db, double now, const proto::id_set& which) {
  return db
      .exec(
          "SELECT COUNT(*) FROM webhook_delivery WHERE status IN ('pending','retry') "
          "AND (next_attempt_at <= $1 OR locked_until > $1) AND " +
              detail::id_filter(which, "subscriber_id"),
          params().add(now))
      .int64(0, 0);
}

std::optional<double> earliest_scheduled(session& db, double now, const proto::id_set& which) {
  const auto found = db.exec(
      "SELECT MIN(GREATEST(next_attempt_at, created_at)) FROM webhook_delivery "
      "WHERE status IN ('pending','retry') "
      "AND locked_until <= $1 AND " +
          detail::id_filter(which, "subscriber_id"),
      params().add(now));
  if (found.is_null(0, 0)) return std::nullopt;
  return found.real(0, 0);
}

std::vector<subscriber_row> load_subscribers(session& db, const proto::id_set& which) {
  const auto rows =
      db.exec(subscriber_columns(db) + "WHERE " + detail::id_filter(which, "id") + " ORDER BY id");
  std::vector<subscriber_row> out;
  for (int i = 0; i < rows.rows(); ++i) out.push_back(read_subscriber(rows, i));
  read_subscriber_orders(db, out);
  return out;
}

std::optional<subscriber_row> load_subscriber(session& db, std::int64_t id) {
  const auto rows = db.exec(subscriber_columns(db) + "WHERE id = $1", params().add(id));
  if (rows.rows() == 0) return std::nullopt;
  auto row = read_subscriber(rows, 0);
  read_subscriber_orders(db, std::span(&row, 1));
  return row;
}

std::int64_t add_subscriber(session& db, const subscriber_row& row) {
  params values;
  add_settings(values, row).add(row.tokens).add(row.tokens_updated_at);
  const std::string columns =
      "url, secret, event_types, rate_per_sec, burst, active, signing, max_in_flight, "
      "batch_max, batch_bytes, batch_linger, coalesce_key, coalesce_window, coalesce_events, "
      "tokens, tokens_updated_at";
  const std::string placeholders =
      "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, "
      "$14, $15, $16";
  if (row.id == 0) {
    return db
        .exec("INSERT INTO webhook_subscriber(" + columns + ") VALUES (" + placeholders +
                  ") RETURNING id",
              values)
        .int64(0, 0);
  }
  values.add(row.id);
  // One step of the caller's transaction when it has one (add_subscriber with credentials).
  std::optional<transaction> step;
  if (!db.in_transaction()) step.emplace(db);
  const auto id = db.exec("INSERT INTO webhook_subscriber(" + columns + ", id) VALUES (" +
                              placeholders + ", $17) RETURNING id",
                          values)
                      .int64(0, 0);
  // An explicit id leaves the identity's sequence behind; move it past, so that the next
  // INSERT without an id (a producer's, or ours) does not collide.
  db.exec(
      "SELECT setval(pg_get_serial_sequence('webhook_subscriber', 'id'), "
      "GREATEST((SELECT MAX(id) FROM webhook_subscriber), 1))");
  if (step) step->commit();
  return id;
}

void set_subscriber_credentials(session& db, const subscriber_row& row) {
  if (row.extra_headers.empty() && row.client_cert_file.empty() && row.client_key_file.empty() &&
      row.proxy.empty()) {
    db.exec("DELETE FROM surge_subscriber_credential WHERE subscriber_id = $1",
            params().add(row.id));
    return;
  }
  db.exec(
      "INSERT INTO surge_subscriber_credential(subscriber_id, headers, client_cert, "
      "client_key, proxy) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (subscriber_id) DO UPDATE "
      "SET headers = EXCLUDED.headers, client_cert = EXCLUDED.client_cert, "
      "client_key = EXCLUDED.client_key, proxy = EXCLUDED.proxy",
      params()
          .add(row.id)
          .add(proto::encode_header_fields(row.extra_headers))
          .add(row.client_cert_file)
          .add(row.client_key_file)
          .add(row.proxy));
}

bool update_subscriber(session& db, const subscriber_row& row) {
  params values;
  add_settings(values, row).add(row.id);
  return db.exec(
               "UPDATE webhook_subscriber SET url = $1, secret = $2, event_types = $3, "
               "rate_per_sec = $4, burst = $5, active = $6, signing = $7, max_in_flight = $8, "
               "batch_max = $9, batch_bytes = $10, batch_linger = $11, coalesce_key = $12, "
               "coalesce_window = $13, coalesce_events = $14 WHERE id = $15",
               values)
             .affected() > 0;
}

bool set_subscriber_active(session& db, std::int64_t id, bool active) {
  return db.exec("UPDATE webhook_subscriber SET active = $1 WHERE id = $2",
                 params().add(active ? 1 : 0).add(id))
             .affected() > 0;
}

std::vector<drainer_ownership> read_ownership(session& db, double now) {
  // The renewal's rule for a live heartbeat (storage/postgres/ownership.cpp).
  const auto rows = db.exec(
      "SELECT d.name, d.subscribers, d.started_at, d.seen_at, o.subscriber_id FROM "
      "(SELECT * FROM surge_drainer WHERE expires_at > $1 AND expires_at <= $2) d "
      "LEFT JOIN surge_owner o ON o.drainer = d.name ORDER BY d.name, o.subscriber_id",
      params().add(now).add(now + detail::max_heartbeat_seconds));
  std::vector<drainer_ownership> drainers;
  for (int i = 0; i < rows.rows(); ++i) {
    const std::string name(rows.text(i, 0));
    if (drainers.empty() || drainers.back().name != name) {
      drainers.push_back(
          {name, std::string(rows.text(i, 1)), rows.real(i, 2), rows.real(i, 3), {}});
    }
    if (!rows.is_null(i, 4)) drainers.back().subscribers.push_back(rows.int64(i, 4));
  }
  return drainers;
}

std::vector<lease_holder> other_live_owners(session& db, double now, const proto::id_set& which,
                                            const std::string& self) {
  std::vector<lease_holder> holders;
  // Usually no other drain holds a live lease; the join would read every outstanding row.
  const auto any =
      db.exec("SELECT EXISTS (SELECT 1 FROM surge_lease WHERE lease > $1 AND owner <> $2)",
              params().add(now).add(self));
  if (any.rows() == 0 || any.text(0, 0) != "t") return holders;
  const auto rows = db.exec(
      "SELECT l.owner, d.subscriber_id, COUNT(*) FROM webhook_delivery d "
      "JOIN surge_lease l ON l.lease = d.locked_until "
      "WHERE d.status IN ('pending', 'retry') AND d.locked_until > $1 AND l.owner <> $2 AND " +
          detail::id_filter(which, "d.subscriber_id") + " GROUP BY 1, 2 ORDER BY 1, 2",
      params().add(now).add(self));
  for (int i = 0; i < rows.rows(); ++i) {
    const std::string owner(rows.text(i, 0));
    if (holders.empty() || holders.back().owner != owner) holders.push_back({.owner = owner});
    holders.back().subscribers.push_back(rows.int64(i, 1));
    holders.back().rows += rows.int64(i, 2);
  }
  return holders;
}

std::vector<subscriber_backlog> backlog_by_subscriber(session& db, double overdue_before,
                                                      const proto::id_set& which) {
  const auto rows = db.exec(
      "SELECT subscriber_id, COUNT(*), "
      "COUNT(*) FILTER (WHERE next_attempt_at < $1 AND created_at < $1) "
      "FROM webhook_delivery WHERE status IN ('pending','retry') AND " +
          detail::id_filter(which, "subscriber_id") + " GROUP BY subscriber_id ORDER BY 1",
      params().add(overdue_before));
  std::vector<subscriber_backlog> out;
  for (int i = 0; i < rows.rows(); ++i) {
    out.push_back({.subscriber_id = rows.int64(i, 0),
                   .queued = rows.int64(i, 1),
                   .overdue = rows.int64(i, 2)});
  }
  return out;
}

}  // namespace surge::storage::pg
