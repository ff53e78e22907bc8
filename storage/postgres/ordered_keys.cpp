// Ordered delivery's tables on PostgreSQL (storage/ordered_keys.hpp).
#include <algorithm>
#include <map>
#include <set>

#include "storage/ordered_claim.hpp"
#include "storage/postgres/queue.hpp"
#include "storage/sql_support.hpp"

namespace surge::storage::pg {
namespace {

// A subscriber's unfinished rows in id (enqueue) order, for the ordered claim.
constexpr const char* create_index_sql =
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS surge_delivery_subscriber_order ON "
    "webhook_delivery(subscriber_id, id) WHERE status IN ('pending','retry')";

// The subscriber's unfinished rows in id order, from past $2: whether each is due, and free, then
// the claim's columns (payloads over the cap read as '').
constexpr const char* ordered_rows_sql =
    "SELECT next_attempt_at <= $3, locked_until <= $3, id, subscriber_id, event_type, "
    "CASE WHEN octet_length(payload) > $4::bigint THEN '' ELSE payload END, attempts, "
    "next_attempt_at, created_at, octet_length(payload), coalesced_since FROM webhook_delivery "
    "WHERE subscriber_id = $1 AND status IN ('pending','retry') AND id > $2 ORDER BY id LIMIT $5";
// Leases the heads chosen, stepping over rows another session holds locked (the steady-state
// drainer claiming); the conditions are read again, so a row taken meanwhile is left out.
constexpr const char* lease_heads_sql = R"sql(
WITH picked AS (
  SELECT id FROM webhook_delivery WHERE id = ANY($1::bigint[])
    AND status IN ('pending','retry') AND next_attempt_at <= $2 AND locked_until <= $2
  FOR UPDATE SKIP LOCKED)
UPDATE webhook_delivery d SET locked_until = $3 WHERE d.id IN (SELECT id FROM picked)
RETURNING d.id
)sql";

bool has_table(session& db, const char* name) {
  return db.exec("SELECT to_regclass($1) IS NOT NULL", params().add(name)).text(0, 0) == "t";
}

}  // namespace

bool write_subscriber_order(session& db, std::int64_t subscriber_id,
                            const std::optional<proto::order_rule>& rule) {
  if (rule) {
    db.exec(
        "INSERT INTO surge_subscriber_order(subscriber_id, key_pointer, dead_key) "
        "VALUES ($1, $2, $3) ON CONFLICT (subscriber_id) DO UPDATE SET "
        "key_pointer = EXCLUDED.key_pointer, dead_key = EXCLUDED.dead_key",
        params().add(subscriber_id).add(rule->pointer).add(proto::dead_key_name(rule->when_dead)));
    return false;
  }
  db.exec("DELETE FROM surge_subscriber_order WHERE subscriber_id = $1",
          params().add(subscriber_id));
  db.exec("DELETE FROM surge_stopped_key WHERE subscriber_id = $1", params().add(subscriber_id));
  return db.exec("SELECT NOT EXISTS (SELECT 1 FROM surge_subscriber_order)").text(0, 0) == "t";
}

void settle_order_index(session& db, bool ordered, bool none_ordered) {
  // Outside any transaction, CONCURRENTLY: producers and drains go on writing while the index is
  // built over a large queue, which may take longer than any statement of a drain. Until it is
  // there the ordered claim reads the due index and sorts.
  session::unbounded long_statements(db);
  if (ordered) {
    db.exec(create_index_sql);
  } else if (none_ordered) {
    db.exec("DROP INDEX CONCURRENTLY IF EXISTS surge_delivery_subscriber_order");
  }
}

void set_subscriber_order(session& db, std::int64_t subscriber_id,
                          const std::optional<proto::order_rule>& rule) {
  bool none_ordered = false;
  {
    transaction step(db);
    none_ordered = write_subscriber_order(db, subscriber_id, rule);
    step.commit();
  }
  settle_order_index(db, rule.has_value(), none_ordered);
}

void read_subscriber_orders(session& db, std::span<subscriber_row> rows) {
  if (rows.empty() || !has_table(db, "surge_subscriber_order")) return;
  const auto found =
      db.exec("SELECT subscriber_id, key_pointer, dead_key FROM surge_subscriber_order");
  std::map<std::int64_t, proto::order_rule> rules;
  for (int i = 0; i < found.rows(); ++i) {
    proto::order_rule rule{.pointer = std::string(found.text(i, 1))};
    proto::parse_dead_key(found.text(i, 2), rule.when_dead);
    rules.emplace(found.int64(i, 0), std::move(rule));
  }
  for (auto& row : rows) {
    const auto rule = rules.find(row.id);
    if (rule != rules.end()) row.order = rule->second;
  }
}

std::vector<stopped_key> list_stopped_keys(session& db, const proto::id_set& which) {
  std::vector<stopped_key> keys;
  if (!has_table(db, "surge_stopped_key")) return keys;
  const auto found = db.exec(
      "SELECT subscriber_id, order_key, delivery_id, stopped_at FROM surge_stopped_key WHERE " +
      detail::id_filter(which, "subscriber_id") + " ORDER BY subscriber_id, stopped_at, order_key");
  for (int i = 0; i < found.rows(); ++i) {
    keys.push_back({.subscriber_id = found.int64(i, 0),
                    .key = std::string(found.text(i, 1)),
                    .delivery_id = found.int64(i, 2),
                    .stopped_at = found.real(i, 3)});
  }
  return keys;
}

int resume_stopped_keys(session& db, std::int64_t subscriber_id,
                        const std::optional<std::string>& key) {
  if (!has_table(db, "surge_stopped_key")) return 0;
  const auto resumed =
      key ? db.exec(
                "DELETE FROM surge_stopped_key WHERE subscriber_id = $1 AND order_key = $2 "
                "RETURNING 1",
                params().add(subscriber_id).add(*key))
          : db.exec("DELETE FROM surge_stopped_key WHERE subscriber_id = $1 RETURNING 1",
                    params().add(subscriber_id));
  return resumed.rows();
}

void resume_keys_stopped_by(session& db, std::span<const std::int64_t> delivery_ids) {
  if (delivery_ids.empty() || !has_table(db, "surge_stopped_key")) return;
  db.exec("DELETE FROM surge_stopped_key WHERE delivery_id = ANY($1::bigint[])",
          params().add_array(delivery_ids));
}

void read_claimed_row(const result& found, int row, int first, claimed_row& out) {
  out.id = found.int64(row, first);
  out.subscriber_id = found.int64(row, first + 1);
  out.event_type = found.text(row, first + 2);
  out.payload = found.text(row, first + 3);
  out.attempts = detail::attempts_in_range(found.int64(row, first + 4));
  out.next_attempt_at = found.real(row, first + 5);
  out.created_at = found.real(row, first + 6);
  out.payload_bytes = found.int64(row, first + 7);
  if (!found.is_null(row, first + 8)) out.coalesced_since = found.real(row, first + 8);
}

std::vector<claimed_row> claim_ordered(session& db, const subscriber_demand& entry, double now,
                                       double lease, std::int64_t max_payload_bytes,
                                       stopped_runs& runs, bool& more_due) {
  more_due = false;
  if (entry.rows <= 0 || !entry.order) return {};
  std::set<std::string, std::less<>> stopped;
  const auto stops = db.exec("SELECT order_key FROM surge_stopped_key WHERE subscriber_id = $1",
                             params().add(entry.subscriber_id));
  for (int i = 0; i < stops.rows(); ++i) stopped.emplace(stops.text(i, 0));
  const ordered_reader reader{
      .payload_cap = max_payload_bytes,
      .page =
          [&](std::int64_t after, std::int64_t limit, std::vector<unfinished_row>& page) {
            const auto found = db.exec(
                ordered_rows_sql, params()
                                      .add(entry.subscriber_id)
                                      .add(after)
                                      .add(now)
                                      .add(std::min(max_payload_bytes, ordered_page_payload_bytes))
                                      .add(limit));
            for (int i = 0; i < found.rows(); ++i) {
              auto& row = page.emplace_back();
              row.due = found.text(i, 0) == "t";
              row.free = found.text(i, 1) == "t";
              read_claimed_row(found, i, 2, row.row);
              row.row.lease = lease;
            }
          },
      .payload_of =
          [&](std::int64_t id) {
            const auto whole =
                db.exec("SELECT payload FROM webhook_delivery WHERE id = $1", params().add(id));
            return whole.rows() > 0 ? std::string(whole.text(0, 0)) : std::string();
          },
  };
  const auto read_after = runs.read_after(entry.subscriber_id, stopped, now);
  auto pick = pick_key_heads(entry, stopped, reader, read_after);
  runs.remember(entry.subscriber_id, stopped, read_after, pick.stopped_through, now);
  more_due = pick.more_due;
  auto& heads = pick.rows;
  if (heads.empty()) return heads;
  std::vector<std::int64_t> ids;
  for (const auto& row : heads) ids.push_back(row.id);
  const auto leased = db.exec(lease_heads_sql, params().add_array(ids).add(now).add(lease));
  std::set<std::int64_t> taken;
  for (int i = 0; i < leased.rows(); ++i) taken.insert(leased.int64(i, 0));
  std::erase_if(heads, [&](const claimed_row& row) { return !taken.contains(row.id); });
  return heads;
}

}  // namespace surge::storage::pg
