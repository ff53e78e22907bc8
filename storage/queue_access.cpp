// The queue functions the tools and the engine's side threads call on a storage::connection:
// each forwards to the connection's backend (storage/queue_backend.hpp), which runs the
// statements of the queue's shape on SQLite or PostgreSQL's, so callers outside storage/ never
// see which database or shape is behind it. What is the same on every backend (which shape a
// queue is, what migrate may create, what it reports) is decided here.
#include <algorithm>
#include <map>
#include <set>

#include "storage/queue_backend.hpp"
#include "storage/schema.hpp"

namespace surge::storage {
namespace {

// What the database holds, and which shape that is.
struct shape_look {
  std::vector<found_table> tables;
  shape_finding finding;
};

shape_look look_at(connection& db) {
  const auto where = printable_location(db.location());
  shape_look look;
  look.tables = db.database().list_tables();
  look.finding = classify_queue(look.tables, db.named_shape(), where);
  if (db.is_postgres() &&
      (db.named_shape() == queue_shape::seed001 || look.finding.shape == queue_shape::seed001)) {
    look.finding = shape_finding{.problem = seed001_not_on_postgres(where)};
  }
  return look;
}

// What `surge migrate` may create: seed000's tables (Surge carries their DDL) in a database
// that holds nothing else of a queue, empty or with some of them already there. Never seed001's,
// and never beside tables of no known shape.
bool may_create_seed000(connection& db, const shape_look& look) {
  if (db.named_shape() == queue_shape::seed001) return false;
  if (holds_table_of(look.tables, queue_shape::seed001)) return false;
  return look.finding.empty || holds_table_of(look.tables, queue_shape::seed000);
}

}  // namespace

queue_shape connection::shape() {
  if (!shape_) shape_ = usable_shape(look_at(*this).finding);
  return *shape_;
}

int schema_version(connection& db) { return db.database().schema_version(); }

int migrate(connection& db, bool create_if_empty) {
  const auto look = look_at(db);
  if (create_if_empty && !look.finding.shape && may_create_seed000(db, look)) {
    // A new queue, or seed000 tables some of which are missing: the shared DDL creates what is
    // absent, then Surge's additions follow.
    return db.database().create_queue();
  }
  if (create_if_empty && look.finding.empty) {
    throw error(look.finding.problem +
                    ". Surge creates only seed000 queues: seed001's tables "
                    "come from that shape's own migrations",
                error::kind::bad_shape);
  }
  usable_shape(look.finding);
  return db.queue().migrate();
}

namespace {

// The schema as migrate_reporting compares it: tables with their columns, indexes, triggers.
struct schema_snapshot {
  std::map<std::string, std::vector<std::string>> tables;  // columns in the table's order
  std::set<std::pair<std::string, std::string>> others;    // (type, name)
};

schema_snapshot snapshot(connection& db) {
  schema_snapshot out;
  for (const auto& table : db.database().list_tables()) {
    out.tables[table.name] = table.columns;
  }
  const auto others = db.database().list_indexes_and_triggers();
  out.others.insert(others.begin(), others.end());
  return out;
}

void append_list(std::string& out, const char* one, const char* many,
                 const std::vector<std::string>& names) {
  if (names.empty()) return;
  if (!out.empty()) out += "; ";
  out += names.size() == 1 ? one : many;
  for (std::size_t i = 0; i < names.size(); ++i) out += (i ? ", " : " ") + names[i];
}

}  // namespace

std::string migration_report::describe() const {
  std::string added;
  append_list(added, "table", "tables", tables);
  append_list(added, "column", "columns", columns);
  append_list(added, "index", "indexes", indexes);
  append_list(added, "trigger", "triggers", triggers);
  std::string dropped;
  append_list(dropped, "index", "indexes", dropped_indexes);
  std::string out;
  if (!added.empty()) out = "added " + added;
  if (!dropped.empty()) out += (out.empty() ? "dropped " : "; dropped ") + dropped;
  return out;
}

migration_report migrate_reporting(connection& db, bool create_if_empty) {
  migration_report report;
  const auto before = snapshot(db);
  report.version_before = before.tables.empty() ? 0 : schema_version(db);
  report.version = migrate(db, create_if_empty);
  const auto after = snapshot(db);
  for (const auto& [table, columns] : after.tables) {
    const auto was = before.tables.find(table);
    if (was == before.tables.end()) {
      report.tables.push_back(table);
      continue;
    }
    for (const auto& column : columns) {
      if (std::find(was->second.begin(), was->second.end(), column) == was->second.end()) {
        report.columns.push_back(table + "." + column);
      }
    }
  }
  for (const auto& item : after.others) {
    if (before.others.contains(item)) continue;
    (item.first == "index" ? report.indexes : report.triggers).push_back(item.second);
  }
  for (const auto& item : before.others) {
    if (item.first == "index" && !after.others.contains(item)) {
      report.dropped_indexes.push_back(item.second);
    }
  }
  return report;
}

std::int64_t emit_event(connection& db, std::string_view event_type, std::string_view payload,
                        double now, int count) {
  return db.queue().emit_event(event_type, payload, now, count);
}

queue_stats read_stats(connection& db, double now, const proto::id_set& which) {
  return db.queue().read_stats(now, which);
}

std::int64_t count_outstanding(connection& db, double now, const proto::id_set& which) {
  return db.queue().count_outstanding(now, which);
}

std::vector<subscriber_row> load_subscribers(connection& db, const proto::id_set& which) {
  return db.queue().load_subscribers(which);
}

std::optional<subscriber_row> load_subscriber(connection& db, std::int64_t id) {
  return db.queue().load_subscriber(id);
}

std::int64_t add_subscriber(connection& db, const subscriber_row& row,
                            credentials_write credentials, order_write order) {
  return db.queue().add_subscriber(row, credentials, order);
}

bool update_subscriber(connection& db, const subscriber_row& row, credentials_write credentials,
                       order_write order) {
  return db.queue().update_subscriber(row, credentials, order);
}

bool set_subscriber_active(connection& db, std::int64_t id, bool active) {
  return db.queue().set_subscriber_active(id, active);
}

void set_subscriber_credentials(connection& db, const subscriber_row& row) {
  db.database().set_subscriber_credentials(row);
}

void set_subscriber_order(connection& db, std::int64_t subscriber_id,
                          const std::optional<proto::order_rule>& rule) {
  db.queue().set_subscriber_order(subscriber_id, rule);
}

std::vector<stopped_key> list_stopped_keys(connection& db, const proto::id_set& which) {
  return db.database().list_stopped_keys(which);
}

int resume_stopped_keys(connection& db, std::int64_t subscriber_id,
                        const std::optional<std::string>& key) {
  return db.database().resume_stopped_keys(subscriber_id, key);
}

void record_partner_quotas(connection& db, std::span<const partner_quota_row> rows) {
  db.database().record_partner_quotas(rows);
}

std::vector<partner_quota_row> load_partner_quotas(connection& db) {
  return db.database().load_partner_quotas();
}

std::vector<drainer_ownership> read_ownership(connection& db, double now) {
  return db.database().read_ownership(now);
}

std::vector<lease_holder> other_live_owners(connection& db, double now, const proto::id_set& which,
                                            const std::string& self) {
  return db.queue().other_live_owners(now, which, self);
}

std::vector<dead_row> list_dead(connection& db, const dead_selection& which) {
  return db.queue().list_dead(which);
}

replay_report replay_dead(connection& db, const dead_selection& which, double now) {
  return db.queue().replay_dead(which, now);
}

std::optional<delivery_detail> find_delivery(connection& db, std::int64_t id) {
  return db.queue().find_delivery(id);
}

std::vector<audit_entry> read_audit(connection& db, const proto::id_set& which,
                                    bool with_delivered) {
  return db.queue().read_audit(which, with_delivered);
}

std::vector<subscriber_backlog> backlog_by_subscriber(connection& db, double overdue_before,
                                                      const proto::id_set& which) {
  return db.queue().backlog_by_subscriber(overdue_before, which);
}

unheld_backlog read_unheld_due_rows(connection& db, std::int64_t subscriber_id, double now,
                                    int limit, std::int64_t max_payload_bytes,
                                    std::int64_t max_total_bytes) {
  return db.queue().read_unheld_due_rows(subscriber_id, now, limit, max_payload_bytes,
                                         max_total_bytes);
}

int mark_coalesced(connection& db, std::span<const replacement> rows, double now) {
  return db.queue().mark_coalesced(rows, now);
}

prune_result prune(connection& db, const prune_options& options,
                   const std::function<void(const prune_result&)>& progress) {
  return db.queue().prune(options, progress);
}

std::int64_t enable_incremental_vacuum(connection& db) {
  return db.database().enable_incremental_vacuum();
}

}  // namespace surge::storage
