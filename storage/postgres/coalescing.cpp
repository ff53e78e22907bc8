// The coalescing sweep's reads and marks on PostgreSQL (storage/coalescing.hpp): the same rules
// as on SQLite, and rows another session holds locked (a drain's claim under way) are stepped
// over, as the claim itself steps over them.
#include "storage/postgres/queue.hpp"

namespace surge::storage::pg {
namespace {

// The partial index on (subscriber_id, next_attempt_at, id) serves the scan.
constexpr const char* unheld_due_rows_sql =
    "SELECT id, event_type, created_at, "
    "CASE WHEN octet_length(payload) <= $4::bigint THEN payload ELSE '' END, coalesced_since "
    "FROM webhook_delivery WHERE subscriber_id = $1 AND status IN ('pending','retry') "
    "AND next_attempt_at <= $2 AND locked_until <= $2 ORDER BY next_attempt_at, id LIMIT $3";

// Each kept row first takes the history of the rows merged into it; a replaced row ends `done`
// only when its keeper was still due and free, and only while it is itself due and free.
constexpr const char* mark_sql = R"sql(
WITH marks AS (
  SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::float8[]) AS m(id, by, since)),
keepers AS (
  SELECT k.id FROM webhook_delivery k
  WHERE k.id IN (SELECT by FROM marks) AND k.status IN ('pending','retry')
    AND k.next_attempt_at <= $4 AND k.locked_until <= $4
  FOR UPDATE SKIP LOCKED),
kept AS (
  UPDATE webhook_delivery k SET coalesced_since = LEAST(COALESCE(k.coalesced_since, k.created_at),
    (SELECT MIN(since) FROM marks WHERE marks.by = k.id))
  WHERE k.id IN (SELECT id FROM keepers) RETURNING k.id),
replaced AS (
  SELECT d.id FROM webhook_delivery d JOIN marks ON marks.id = d.id
  WHERE marks.by IN (SELECT id FROM kept) AND d.status IN ('pending','retry')
    AND d.next_attempt_at <= $4 AND d.locked_until <= $4
  FOR UPDATE OF d SKIP LOCKED)
UPDATE webhook_delivery d SET status = 'done', coalesced_into = marks.by,
  last_error = 'coalesced into delivery ' || marks.by
FROM marks WHERE d.id = marks.id AND d.id IN (SELECT id FROM replaced)
RETURNING d.id
)sql";

}  // namespace

unheld_backlog read_unheld_due_rows(session& db, std::int64_t subscriber_id, double now, int limit,
                                    std::int64_t max_payload_bytes, std::int64_t max_total_bytes) {
  // Read first: a row committed after it has a higher id, unless its producer took the id before
  // and committed after (a sequence hands ids out at insert): such a row is claimed unjudged, and
  // the shard's own coalescing among the rows it holds still applies.
  const auto newest = db.exec("SELECT COALESCE(MAX(id), 0) FROM webhook_delivery", params());
  const auto found = db.exec(
      unheld_due_rows_sql, params().add(subscriber_id).add(now).add(limit).add(max_payload_bytes));
  unheld_backlog backlog{.judged_through = newest.int64(0, 0)};
  auto& rows = backlog.rows;
  std::int64_t total = 0;
  for (int i = 0; i < found.rows() && total <= max_total_bytes; ++i) {
    auto& row = rows.emplace_back();
    row.id = found.int64(i, 0);
    row.event_type = found.text(i, 1);
    row.created_at = found.real(i, 2);
    row.payload = found.text(i, 3);
    if (!found.is_null(i, 4)) row.coalesced_since = found.real(i, 4);
    total += static_cast<std::int64_t>(row.payload.size());
  }
  if (total > max_total_bytes || found.rows() >= limit) {
    backlog.judged_through = highest_id_read(rows, backlog.judged_through);
  }
  return backlog;
}

int mark_coalesced(session& db, std::span<const replacement> rows, double now) {
  if (rows.empty()) return 0;
  std::vector<std::int64_t> ids, by;
  std::vector<double> since;
  for (const auto& row : rows) {
    ids.push_back(row.id);
    by.push_back(row.replaced_by);
    since.push_back(row.stands_since);
  }
  transaction step(db);
  const auto marked =
      db.exec(mark_sql, params().add_array(ids).add_array(by).add_array(since).add(now));
  step.commit();
  return marked.rows();
}

}  // namespace surge::storage::pg
