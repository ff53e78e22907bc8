// What Surge runs on a seed001 queue (storage/sqlite/queue_shape.hpp): the claim's statements
// over webhook_deliveries, the persisted buckets in webhook_buckets, the new-row watch, the
// outcome writer, and the shape's own migration, rows and subscribers (storage/seed001/queue.hpp).
// The rules around them (the sweep, lease values and fences, token leases, ownership) are
// seed000's, shared.
#include "storage/seed001/outcomes.hpp"
#include "storage/seed001/queue.hpp"
#include "storage/seed001/sql.hpp"
#include "storage/sqlite/queue_shape.hpp"
#include "storage/sqlite/sql_support.hpp"

namespace surge::storage::sqlite {
namespace {

// The columns every claim read returns (claim_statements), from webhook_deliveries: a BLOB
// payload's bytes as they are, the stored signature last.
constexpr const char* claimed_columns =
    "SELECT id, subscriber_id, event_type, "
    "CASE WHEN length(CAST(payload AS BLOB)) > :max_payload THEN '' ELSE payload END, "
    "attempt, next_attempt, enqueued_at, length(CAST(payload AS BLOB)), NULL, signature "
    "FROM webhook_deliveries ";

const claim_statements& seed001_claim_statements() {
  using seed001::free_at;
  constexpr int rows = claimer::rows_per_lease;
  // `state = 'pending'` as Surge's partial index has it, so the read walks that index; the
  // sweep reads the rowid range (NOT INDEXED), and `+state` keeps the lease writes on the rowid.
  static const claim_statements statements{
      .due_rows = std::string(claimed_columns) +
                  "WHERE subscriber_id = :sid AND state = 'pending' AND next_attempt <= :now AND " +
                  free_at(":now") + " AND id <= :through ORDER BY next_attempt, id LIMIT :n",
      .lease_row = "UPDATE webhook_deliveries SET leased_until = ?1 WHERE id = ?2 AND " +
                   free_at("?3") + " AND state = 'pending'",
      .lease_rows = "UPDATE OR FAIL webhook_deliveries SET leased_until = ?1 WHERE id IN (" +
                    detail::numbered_placeholders(3, rows) + ") AND " + free_at("?2") +
                    " AND +state = 'pending'",
      .leased_rows = "SELECT id FROM webhook_deliveries WHERE id IN (" +
                     detail::numbered_placeholders(2, rows) + ") AND leased_until = ?1",
      .sweep =
          [] {
            std::string text = claimed_columns;
            text.replace(text.find(":max_payload"), 12, "?1");
            return text +
                   "NOT INDEXED WHERE id >= ?2 AND id < ?3 AND state = 'pending' "
                   "AND next_attempt <= ?4 AND " +
                   free_at("?4") + " ORDER BY id";
          }(),
      .release = "UPDATE webhook_deliveries SET leased_until = 0 WHERE id = ? AND leased_until = ?",
      .last_id = "SELECT COALESCE(MAX(id), 0) FROM webhook_deliveries",
      // Through surge_deliveries_subscriber_order (seed001::ordered_claim_index).
      .ordered_rows = "SELECT next_attempt <= :now, " + free_at(":now") + ", " +
                      std::string(claimed_columns).substr(7) +
                      "WHERE subscriber_id = :sid AND state = 'pending' AND id > :after "
                      "ORDER BY id LIMIT :n",
      .payload_of = "SELECT payload FROM webhook_deliveries WHERE id = ?1",
  };
  return statements;
}

// The bucket of a subscriber without a webhook_buckets row is full (its worker inserts the row
// on first use); a rate that is not a number reads as none.
const bucket_statements& seed001_bucket_statements() {
  static const bucket_statements statements{
      .read =
          "SELECT COALESCE(b.tokens, s.burst), COALESCE(b.updated_at, 0), "
          "CASE WHEN typeof(s.rate_per_min) IN ('integer', 'real') "
          "THEN s.rate_per_min / 60.0 END, s.burst FROM webhook_subscribers s "
          "LEFT JOIN webhook_buckets b ON b.subscriber_id = s.id WHERE s.id = ?1",
      .write =
          "INSERT INTO webhook_buckets(tokens, updated_at, subscriber_id) VALUES (?1, ?2, ?3) "
          "ON CONFLICT(subscriber_id) DO UPDATE SET tokens = excluded.tokens, "
          "updated_at = excluded.updated_at",
  };
  return statements;
}

const change_statements& seed001_change_statements() {
  static const change_statements statements{
      .max_id = "SELECT COALESCE(MAX(id), 0) FROM webhook_deliveries",
      .added =
          "SELECT id, subscriber_id, state = 'pending' AND next_attempt <= :now "
          "FROM webhook_deliveries WHERE id > :after ORDER BY id LIMIT :limit",
  };
  return statements;
}

}  // namespace

const sqlite_queue_shape& seed001_sqlite_shape() {
  static const sqlite_queue_shape shape{
      .claims = seed001_claim_statements(),
      .buckets = seed001_bucket_statements(),
      .new_rows = seed001_change_statements(),
      .deliveries = seed001_deliveries(),
      .make_writer = [](SQLite::Database& db) -> std::unique_ptr<outcome_applier> {
        return std::make_unique<seed001::outcome_writer>(db);
      },
      .ordered_claims = seed001::ordered_claim_index(),
      .migrate = &seed001::migrate,
      .emit_event = &seed001::emit_event,
      .read_stats = &seed001::read_stats,
      .load_subscriber = &seed001::load_subscriber,
      .add_subscriber = &seed001::add_subscriber,
      .update_subscriber = &seed001::update_subscriber,
      .set_subscriber_active = &seed001::set_subscriber_active,
      .coalesces = false,
  };
  return shape;
}

}  // namespace surge::storage::sqlite
