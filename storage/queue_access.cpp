// The queue functions the tools and the engine's side threads call on a storage::connection:
// each runs the SQLite or the PostgreSQL version, whichever the connection is, so callers
// outside storage/ never see which database is behind it.
#include "storage/audit.hpp"
#include "storage/backend.hpp"
#include "storage/backlog.hpp"
#include "storage/coalescing.hpp"
#include "storage/dead_letters.hpp"
#include "storage/maintenance.hpp"
#include "storage/partner_quotas.hpp"
#include "storage/postgres/queue.hpp"
#include "storage/queue.hpp"
#include "storage/retention.hpp"
#include "storage/schema.hpp"
#include "storage/subscribers.hpp"

namespace surge::storage {

int schema_version(connection& db) {
  return on_backend(
      db, [](SQLite::Database& file) { return schema_version(file); },
      [](pg::session& server) { return pg::schema_version(server); });
}

int migrate(connection& db) {
  return on_backend(
      db, [](SQLite::Database& file) { return migrate(file); },
      [](pg::session& server) { return pg::migrate(server); });
}

std::int64_t emit_event(connection& db, std::string_view event_type, std::string_view payload,
                        double now, int count) {
  return on_backend(
      db, [&](SQLite::Database& file) { return emit_event(file, event_type, payload, now, count); },
      [&](pg::session& server) { return pg::emit_event(server, event_type, payload, now, count); });
}

queue_stats read_stats(connection& db, double now, const proto::id_set& which) {
  return on_backend(
      db, [&](SQLite::Database& file) { return read_stats(file, now, which); },
      [&](pg::session& server) { return pg::read_stats(server, now, which); });
}

std::int64_t count_outstanding(connection& db, double now, const proto::id_set& which) {
  return on_backend(
      db, [&](SQLite::Database& file) { return count_outstanding(file, now, which); },
      [&](pg::session& server) { return pg::count_outstanding(server, now, which); });
}

std::vector<subscriber_row> load_subscribers(connection& db, const proto::id_set& which) {
  return on_backend(
      db, [&](SQLite::Database& file) { return load_subscribers(file, which); },
      [&](pg::session& server) { return pg::load_subscribers(server, which); });
}

std::optional<subscriber_row> load_subscriber(connection& db, std::int64_t id) {
  return on_backend(
      db, [&](SQLite::Database& file) { return load_subscriber(file, id); },
      [&](pg::session& server) { return pg::load_subscriber(server, id); });
}

std::int64_t add_subscriber(connection& db, const subscriber_row& row) {
  return on_backend(
      db, [&](SQLite::Database& file) { return add_subscriber(file, row); },
      [&](pg::session& server) { return pg::add_subscriber(server, row); });
}

bool update_subscriber(connection& db, const subscriber_row& row) {
  return on_backend(
      db, [&](SQLite::Database& file) { return update_subscriber(file, row); },
      [&](pg::session& server) { return pg::update_subscriber(server, row); });
}

bool set_subscriber_active(connection& db, std::int64_t id, bool active) {
  return on_backend(
      db, [&](SQLite::Database& file) { return set_subscriber_active(file, id, active); },
      [&](pg::session& server) { return pg::set_subscriber_active(server, id, active); });
}

void record_partner_quotas(connection& db, std::span<const partner_quota_row> rows) {
  on_backend(
      db, [&](SQLite::Database& file) { record_partner_quotas(file, rows); },
      [&](pg::session& server) { pg::record_partner_quotas(server, rows); });
}

std::vector<partner_quota_row> load_partner_quotas(connection& db) {
  return on_backend(
      db, [](SQLite::Database& file) { return load_partner_quotas(file); },
      [](pg::session& server) { return pg::load_partner_quotas(server); });
}

std::vector<drainer_ownership> read_ownership(connection& db, double now) {
  return on_backend(
      db, [&](SQLite::Database& file) { return read_ownership(file, now); },
      [&](pg::session& server) { return pg::read_ownership(server, now); });
}

std::vector<lease_holder> other_live_owners(connection& db, double now,
                                            const proto::id_set& which, const std::string& self) {
  return on_backend(
      db, [&](SQLite::Database& file) { return other_live_owners(file, now, which, self); },
      [&](pg::session& server) { return pg::other_live_owners(server, now, which, self); });
}

std::vector<dead_row> list_dead(connection& db, const dead_selection& which) {
  return on_backend(
      db, [&](SQLite::Database& file) { return list_dead(file, which); },
      [&](pg::session& server) { return pg::list_dead(server, which); });
}

replay_report replay_dead(connection& db, const dead_selection& which, double now) {
  return on_backend(
      db, [&](SQLite::Database& file) { return replay_dead(file, which, now); },
      [&](pg::session& server) { return pg::replay_dead(server, which, now); });
}

std::vector<audit_entry> read_audit(connection& db, const proto::id_set& which,
                                    bool with_delivered) {
  return on_backend(
      db, [&](SQLite::Database& file) { return read_audit(file, which, with_delivered); },
      [&](pg::session& server) { return pg::read_audit(server, which, with_delivered); });
}

std::vector<subscriber_backlog> backlog_by_subscriber(connection& db, double overdue_before,
                                                      const proto::id_set& which) {
  return on_backend(
      db, [&](SQLite::Database& file) { return backlog_by_subscriber(file, overdue_before, which); },
      [&](pg::session& server) { return pg::backlog_by_subscriber(server, overdue_before, which); });
}

std::vector<backlog_row> read_unheld_due_rows(connection& db, std::int64_t subscriber_id,
                                              double now, int limit,
                                              std::int64_t max_payload_bytes,
                                              std::int64_t max_total_bytes) {
  return on_backend(
      db,
      [&](SQLite::Database& file) {
        return read_unheld_due_rows(file, subscriber_id, now, limit, max_payload_bytes,
                                    max_total_bytes);
      },
      [](pg::session&) -> std::vector<backlog_row> { not_on_postgres("coalescing"); });
}

int mark_coalesced(connection& db, std::span<const replacement> rows, double now) {
  return on_backend(
      db, [&](SQLite::Database& file) { return mark_coalesced(file, rows, now); },
      [](pg::session&) -> int { not_on_postgres("coalescing"); });
}

prune_result prune(connection& db, const prune_options& options,
                   const std::function<void(const prune_result&)>& progress) {
  return on_backend(
      db, [&](SQLite::Database& file) { return prune(file, options, progress); },
      [](pg::session&) -> prune_result { not_on_postgres("surge prune"); });
}

std::int64_t enable_incremental_vacuum(connection& db) {
  return on_backend(
      db, [&](SQLite::Database& file) { return enable_incremental_vacuum(file); },
      [](pg::session&) -> std::int64_t { not_on_postgres("surge prune --enable-vacuum"); });
}

}  // namespace surge::storage
