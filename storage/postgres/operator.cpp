// The operator's reads and repairs on a PostgreSQL queue: dead letters (`surge dead`) and the
// rate audit (`surge audit`), with the contracts of storage/dead_letters.hpp and audit.hpp.
#include <set>

#include "storage/postgres/queue.hpp"
#include "storage/sql_support.hpp"

namespace surge::storage::pg {
namespace {

// The WHERE clause list and replay share; $1 is the `since` bound when set, then the limit.
std::string selection_sql(const dead_selection& which, params& values) {
  std::string sql = "status = 'dead' AND " + detail::id_filter(which.subscribers, "subscriber_id") +
                    " AND " + detail::id_filter(which.ids, "id");
  if (which.created_since) {
    values.add(*which.created_since);
    sql += " AND created_at >= $" + std::to_string(values.size());
  }
  return sql;
}

std::string newest_first(const dead_selection& which, params& values) {
  std::string sql = " ORDER BY created_at DESC, id DESC";
  if (which.limit) {
    values.add(*which.limit);
    sql += " LIMIT $" + std::to_string(values.size());
  }
  return sql;
}

}  // namespace

std::vector<dead_row> list_dead(session& db, const dead_selection& which) {
  params values;
  const std::string where = selection_sql(which, values);
  const auto found = db.exec(
      "SELECT id, subscriber_id, event_type, attempts, last_status, "
      "last_error, created_at FROM webhook_delivery WHERE " +
          where + newest_first(which, values),
      values);
  std::vector<dead_row> rows;
  for (int i = 0; i < found.rows(); ++i) {
    dead_row& row = rows.emplace_back();
    row.id = found.int64(i, 0);
    row.subscriber_id = found.int64(i, 1);
    row.event_type = found.text(i, 2);
    row.attempts = found.int64(i, 3);
    row.last_status = static_cast<int>(found.int64(i, 4));
    row.last_error = found.text(i, 5);
    row.created_at = found.real(i, 6);
  }
  return rows;
}

replay_report replay_dead(session& db, const dead_selection& which, double now) {
  params values;
  values.add(now);
  std::string where = selection_sql(which, values);
  // With a limit the newest rows are chosen by a subquery, as `dead list` would show them.
  if (which.limit) {
    where =
        "id IN (SELECT id FROM webhook_delivery WHERE " + where + newest_first(which, values) + ")";
  }
  transaction step(db);
  const auto replayed = db.exec(
      "UPDATE webhook_delivery SET status = 'pending', attempts = 0, next_attempt_at = $1, "
      "locked_until = 0, created_at = $1 WHERE " +
          where + " RETURNING subscriber_id, id",
      values);
  std::set<std::int64_t> subscribers;
  std::vector<std::int64_t> rows;
  for (int i = 0; i < replayed.rows(); ++i) {
    subscribers.insert(replayed.int64(i, 0));
    rows.push_back(replayed.int64(i, 1));
  }
  // The keys these rows stopped go on, the replayed row first.
  resume_keys_stopped_by(db, rows);
  replay_report report;
  report.replayed = replayed.rows();
  std::vector<std::int64_t> ids(subscribers.begin(), subscribers.end());
  const auto active =
      db.exec("SELECT id FROM webhook_subscriber WHERE id = ANY($1::bigint[]) AND active <> 0",
              params().add_array(ids));
  std::set<std::int64_t> sendable;
  for (int i = 0; i < active.rows(); ++i) sendable.insert(active.int64(i, 0));
  for (const auto id : ids) {
    if (!sendable.contains(id)) report.inactive_subscribers.push_back(id);
  }
  step.commit();
  return report;
}

std::optional<delivery_detail> find_delivery(session& db, std::int64_t id) {
  const auto found = db.exec(
      "SELECT id, subscriber_id, event_type, status, attempts, last_status, last_error, "
      "created_at, (SELECT MAX(finished_at) FROM surge_attempt WHERE delivery_id = d.id), "
      "payload FROM webhook_delivery d WHERE id = $1",
      params().add(id));
  if (found.rows() == 0) return std::nullopt;
  delivery_detail row;
  row.id = found.int64(0, 0);
  row.subscriber_id = found.int64(0, 1);
  row.event_type = found.text(0, 2);
  row.status = found.text(0, 3);
  row.attempts = found.int64(0, 4);
  row.last_status = static_cast<int>(found.int64(0, 5));
  row.last_error = found.text(0, 6);
  row.created_at = found.real(0, 7);
  if (!found.is_null(0, 8)) row.finished_at = found.real(0, 8);
  row.payload = found.text(0, 9);
  return row;
}

std::vector<audit_entry> read_audit(session& db, const proto::id_set& which, bool with_delivered) {
  // One snapshot for the limits and the attempts; a cursor, so memory follows one fetch.
  transaction snapshot(db, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  std::map<std::int64_t, audit_limit> limits;
  for (const auto& row : load_subscribers(db, which)) {
    limits[row.id] = {row.rate_per_sec, row.burst, row.active};
  }
  audit_collector collect(std::move(limits), with_delivered);
  // A batch POST left one record per row; its first row's record stands for the request.
  db.exec(
      "DECLARE surge_audit NO SCROLL CURSOR FOR SELECT subscriber_id, started_at, "
      "finished_at, COALESCE(status_code, 0), batch_size FROM surge_attempt WHERE "
      "(batch_lead IS NULL OR batch_lead = delivery_id) AND " +
      detail::id_filter(which, "subscriber_id") + " ORDER BY subscriber_id, started_at");
  while (true) {
    const auto batch = db.exec("FETCH 10000 FROM surge_audit");
    if (batch.rows() == 0) break;
    for (int i = 0; i < batch.rows(); ++i) {
      collect.add(batch.int64(i, 0), {batch.real(i, 1), batch.real(i, 2),
                                      static_cast<int>(batch.int64(i, 3)), batch.int64(i, 4)});
    }
  }
  snapshot.commit();
  return collect.finish();
}

}  // namespace surge::storage::pg
