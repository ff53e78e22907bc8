// The queue functions the tools and the engine's side threads call on a storage::connection:
// each runs the SQLite statements of the queue's shape or the PostgreSQL ones, whichever the
// connection is, so callers outside storage/ never see which database or shape is behind it.
#include <algorithm>
#include <map>
#include <set>

#include "storage/postgres/queue.hpp"
#include "storage/postgres/session.hpp"
#include "storage/seed001/queue.hpp"
#include "storage/sqlite/audit.hpp"
#include "storage/sqlite/backend.hpp"
#include "storage/sqlite/backlog.hpp"
#include "storage/sqlite/coalescing.hpp"
#include "storage/sqlite/dead_letters.hpp"
#include "storage/sqlite/maintenance.hpp"
#include "storage/sqlite/ordered_keys.hpp"
#include "storage/sqlite/ownership.hpp"
#include "storage/sqlite/partner_quotas.hpp"
#include "storage/sqlite/queue.hpp"
#include "storage/sqlite/retention.hpp"
#include "storage/sqlite/schema.hpp"
#include "storage/sqlite/sql_support.hpp"
#include "storage/sqlite/subscribers.hpp"

namespace surge::storage {
// The door: the neutral API's calls reach the SQLite backend's overloads from here only.
using namespace surge::storage::sqlite;
namespace {

// What the database holds, and which shape that is.
struct shape_look {
  std::vector<found_table> tables;
  shape_finding finding;
};

shape_look look_at(connection& db) {
  const auto where = printable_location(db.location());
  shape_look look;
  look.tables = on_backend(
      db, [](SQLite::Database& file) { return list_tables(file); },
      [](pg::session& server) { return pg::list_tables(server); });
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

// Runs `seed000(SQLite::Database&)` or `seed001(SQLite::Database&)` for the file's shape, or
// `on_postgres(pg::session&)`, with SQLite's errors as storage::error.
template <class Seed000, class Seed001, class OnPostgres>
decltype(auto) on_queue(connection& db, Seed000&& seed000, Seed001&& seed001,
                        OnPostgres&& on_postgres) {
  const auto shape = db.shape();
  return on_backend(
      db,
      [&](SQLite::Database& file) {
        if (shape == queue_shape::seed001) return seed001(file);
        return seed000(file);
      },
      std::forward<OnPostgres>(on_postgres));
}

[[noreturn]] void not_on_seed001(std::string_view what) {
  throw error(std::string(what) + " is not available on a seed001 queue", error::kind::unsupported);
}

}  // namespace

queue_shape connection::shape() {
  if (!shape_) shape_ = usable_shape(look_at(*this).finding);
  return *shape_;
}

int schema_version(connection& db) {
  return on_backend(
      db, [](SQLite::Database& file) { return schema_version(file); },
      [](pg::session& server) { return pg::schema_version(server); });
}

int migrate(connection& db, bool create_if_empty) {
  const auto look = look_at(db);
  if (create_if_empty && !look.finding.shape && may_create_seed000(db, look)) {
    // A new queue, or seed000 tables some of which are missing: the shared DDL creates what is
    // absent, then Surge's additions follow.
    return on_backend(
        db, [](SQLite::Database& file) { return migrate(file); },
        [](pg::session& server) { return pg::migrate(server); });
  }
  if (create_if_empty && look.finding.empty) {
    throw error(look.finding.problem +
                    ". Surge creates only seed000 queues: seed001's tables "
                    "come from that shape's own migrations",
                error::kind::bad_shape);
  }
  usable_shape(look.finding);
  return on_queue(
      db, [](SQLite::Database& file) { return migrate(file); },
      [](SQLite::Database& file) { return seed001::migrate(file); },
      [](pg::session& server) { return pg::migrate(server); });
}

namespace {

// The schema as migrate_reporting compares it: tables with their columns, indexes, triggers.
struct schema_snapshot {
  std::map<std::string, std::vector<std::string>> tables;  // columns in the table's order
  std::set<std::pair<std::string, std::string>> others;    // (type, name)
};

schema_snapshot snapshot(connection& db) {
  schema_snapshot out;
  const auto tables = on_backend(
      db, [](SQLite::Database& file) { return list_tables(file); },
      [](pg::session& server) { return pg::list_tables(server); });
  for (const auto& table : tables) {
    out.tables[table.name] = table.columns;
  }
  const auto others = on_backend(
      db, [](SQLite::Database& file) { return list_indexes_and_triggers(file); },
      [](pg::session& server) { return pg::list_indexes_and_triggers(server); });
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
  return on_queue(
      db, [&](SQLite::Database& file) { return emit_event(file, event_type, payload, now, count); },
      [&](SQLite::Database& file) {
        return seed001::emit_event(file, event_type, payload, now, count);
      },
      [&](pg::session& server) { return pg::emit_event(server, event_type, payload, now, count); });
}

queue_stats read_stats(connection& db, double now, const proto::id_set& which) {
  return on_queue(
      db, [&](SQLite::Database& file) { return read_stats(file, now, which); },
      [&](SQLite::Database& file) { return seed001::read_stats(file, now, which); },
      [&](pg::session& server) { return pg::read_stats(server, now, which); });
}

std::int64_t count_outstanding(connection& db, double now, const proto::id_set& which) {
  return on_queue(
      db, [&](SQLite::Database& file) { return count_outstanding(file, now, which); },
      [&](SQLite::Database& file) {
        return count_outstanding(file, now, which, seed001_deliveries());
      },
      [&](pg::session& server) { return pg::count_outstanding(server, now, which); });
}

std::vector<subscriber_row> load_subscribers(connection& db, const proto::id_set& which) {
  return on_queue(
      db, [&](SQLite::Database& file) { return load_subscribers(file, which); },
      [&](SQLite::Database& file) { return seed001::load_subscribers(file, which); },
      [&](pg::session& server) { return pg::load_subscribers(server, which); });
}

std::optional<subscriber_row> load_subscriber(connection& db, std::int64_t id) {
  return on_queue(
      db, [&](SQLite::Database& file) { return load_subscriber(file, id); },
      [&](SQLite::Database& file) { return seed001::load_subscriber(file, id); },
      [&](pg::session& server) { return pg::load_subscriber(server, id); });
}

std::int64_t add_subscriber(connection& db, const subscriber_row& row,
                            credentials_write credentials, order_write order) {
  // The credentials row names the id the insert was given.
  const auto with_id = [&](std::int64_t id) {
    auto added = row;
    added.id = id;
    return added;
  };
  const bool replace = credentials == credentials_write::replace;
  const bool ordering = order == order_write::replace;
  // On SQLite the shape's insert, the credentials and the order rule join one write transaction
  // (each function opens its own only when none is open); on PostgreSQL one transaction holds
  // them, and the order index follows it.
  return on_queue(
      db,
      [&](SQLite::Database& file) {
        sqlite::write_transaction step(file);
        const auto id = add_subscriber(file, row);
        if (replace) set_subscriber_credentials(file, with_id(id));
        if (ordering) set_subscriber_order(file, id, row.order, seed000_ordered_index());
        step.commit();
        return id;
      },
      [&](SQLite::Database& file) {
        sqlite::write_transaction step(file);
        const auto id = seed001::add_subscriber(file, row);
        if (replace) set_subscriber_credentials(file, with_id(id));
        if (ordering) set_subscriber_order(file, id, row.order, seed001::ordered_claim_index());
        step.commit();
        return id;
      },
      [&](pg::session& server) {
        bool none_ordered = false;
        std::int64_t id = 0;
        {
          pg::transaction step(server);
          id = pg::add_subscriber(server, row);
          if (replace) pg::set_subscriber_credentials(server, with_id(id));
          if (ordering) none_ordered = pg::write_subscriber_order(server, id, row.order);
          step.commit();
        }
        if (ordering) pg::settle_order_index(server, row.order.has_value(), none_ordered);
        return id;
      });
}

bool update_subscriber(connection& db, const subscriber_row& row, credentials_write credentials,
                       order_write order) {
  const bool replace = credentials == credentials_write::replace;
  const bool ordering = order == order_write::replace;
  return on_queue(
      db,
      [&](SQLite::Database& file) {
        sqlite::write_transaction step(file);
        const bool found = update_subscriber(file, row);
        if (found && replace) set_subscriber_credentials(file, row);
        if (found && ordering)
          set_subscriber_order(file, row.id, row.order, seed000_ordered_index());
        step.commit();
        return found;
      },
      [&](SQLite::Database& file) {
        sqlite::write_transaction step(file);
        const bool found = seed001::update_subscriber(file, row);
        if (found && replace) set_subscriber_credentials(file, row);
        if (found && ordering) {
          set_subscriber_order(file, row.id, row.order, seed001::ordered_claim_index());
        }
        step.commit();
        return found;
      },
      [&](pg::session& server) {
        bool found = false;
        bool none_ordered = false;
        {
          pg::transaction step(server);
          found = pg::update_subscriber(server, row);
          if (found && replace) pg::set_subscriber_credentials(server, row);
          if (found && ordering)
            none_ordered = pg::write_subscriber_order(server, row.id, row.order);
          step.commit();
        }
        if (found && ordering) pg::settle_order_index(server, row.order.has_value(), none_ordered);
        return found;
      });
}

bool set_subscriber_active(connection& db, std::int64_t id, bool active) {
  return on_queue(
      db, [&](SQLite::Database& file) { return set_subscriber_active(file, id, active); },
      [&](SQLite::Database& file) { return seed001::set_subscriber_active(file, id, active); },
      [&](pg::session& server) { return pg::set_subscriber_active(server, id, active); });
}

void set_subscriber_credentials(connection& db, const subscriber_row& row) {
  // The same table on either SQLite shape.
  on_backend(
      db, [&](SQLite::Database& file) { set_subscriber_credentials(file, row); },
      [&](pg::session& server) { pg::set_subscriber_credentials(server, row); });
}

void set_subscriber_order(connection& db, std::int64_t subscriber_id,
                          const std::optional<proto::order_rule>& rule) {
  on_queue(
      db,
      [&](SQLite::Database& file) {
        set_subscriber_order(file, subscriber_id, rule, seed000_ordered_index());
      },
      [&](SQLite::Database& file) {
        set_subscriber_order(file, subscriber_id, rule, seed001::ordered_claim_index());
      },
      [&](pg::session& server) { pg::set_subscriber_order(server, subscriber_id, rule); });
}

std::vector<stopped_key> list_stopped_keys(connection& db, const proto::id_set& which) {
  // The same table on either SQLite shape.
  return on_backend(
      db, [&](SQLite::Database& file) { return list_stopped_keys(file, which); },
      [&](pg::session& server) { return pg::list_stopped_keys(server, which); });
}

int resume_stopped_keys(connection& db, std::int64_t subscriber_id,
                        const std::optional<std::string>& key) {
  return on_backend(
      db, [&](SQLite::Database& file) { return resume_stopped_keys(file, subscriber_id, key); },
      [&](pg::session& server) { return pg::resume_stopped_keys(server, subscriber_id, key); });
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
  // Surge's own tables, the same in either shape.
  return on_backend(
      db, [&](SQLite::Database& file) { return read_ownership(file, now); },
      [&](pg::session& server) { return pg::read_ownership(server, now); });
}

std::vector<lease_holder> other_live_owners(connection& db, double now, const proto::id_set& which,
                                            const std::string& self) {
  return on_queue(
      db, [&](SQLite::Database& file) { return other_live_owners(file, now, which, self); },
      [&](SQLite::Database& file) {
        return other_live_owners(file, now, which, self, seed001_deliveries());
      },
      [&](pg::session& server) { return pg::other_live_owners(server, now, which, self); });
}

std::vector<dead_row> list_dead(connection& db, const dead_selection& which) {
  return on_queue(
      db, [&](SQLite::Database& file) { return list_dead(file, which); },
      [&](SQLite::Database& file) { return list_dead(file, which, seed001_deliveries()); },
      [&](pg::session& server) { return pg::list_dead(server, which); });
}

replay_report replay_dead(connection& db, const dead_selection& which, double now) {
  return on_queue(
      db, [&](SQLite::Database& file) { return replay_dead(file, which, now); },
      [&](SQLite::Database& file) { return replay_dead(file, which, now, seed001_deliveries()); },
      [&](pg::session& server) { return pg::replay_dead(server, which, now); });
}

std::optional<delivery_detail> find_delivery(connection& db, std::int64_t id) {
  return on_queue(
      db, [&](SQLite::Database& file) { return find_delivery(file, id); },
      [&](SQLite::Database& file) { return find_delivery(file, id, seed001_deliveries()); },
      [&](pg::session& server) { return pg::find_delivery(server, id); });
}

std::vector<audit_entry> read_audit(connection& db, const proto::id_set& which,
                                    bool with_delivered) {
  return on_queue(
      db, [&](SQLite::Database& file) { return read_audit(file, which, with_delivered); },
      [&](SQLite::Database& file) {
        return read_audit(file, which, with_delivered, seed001_deliveries());
      },
      [&](pg::session& server) { return pg::read_audit(server, which, with_delivered); });
}

std::vector<subscriber_backlog> backlog_by_subscriber(connection& db, double overdue_before,
                                                      const proto::id_set& which) {
  return on_queue(
      db,
      [&](SQLite::Database& file) { return backlog_by_subscriber(file, overdue_before, which); },
      [&](SQLite::Database& file) {
        return backlog_by_subscriber(file, overdue_before, which, seed001_deliveries());
      },
      [&](pg::session& server) {
        return pg::backlog_by_subscriber(server, overdue_before, which);
      });
}

unheld_backlog read_unheld_due_rows(connection& db, std::int64_t subscriber_id, double now,
                                    int limit, std::int64_t max_payload_bytes,
                                    std::int64_t max_total_bytes) {
  // Coalescing marks rows done without sending them; seed001 has no such state.
  return on_queue(
      db,
      [&](SQLite::Database& file) {
        return read_unheld_due_rows(file, subscriber_id, now, limit, max_payload_bytes,
                                    max_total_bytes);
      },
      [](SQLite::Database&) -> unheld_backlog { not_on_seed001("coalescing"); },
      [&](pg::session& server) {
        return pg::read_unheld_due_rows(server, subscriber_id, now, limit, max_payload_bytes,
                                        max_total_bytes);
      });
}

int mark_coalesced(connection& db, std::span<const replacement> rows, double now) {
  return on_queue(
      db, [&](SQLite::Database& file) { return mark_coalesced(file, rows, now); },
      [](SQLite::Database&) -> int { not_on_seed001("coalescing"); },
      [&](pg::session& server) { return pg::mark_coalesced(server, rows, now); });
}

prune_result prune(connection& db, const prune_options& options,
                   const std::function<void(const prune_result&)>& progress) {
  return on_queue(
      db, [&](SQLite::Database& file) { return prune(file, options, progress); },
      [&](SQLite::Database& file) { return prune(file, options, progress, seed001_deliveries()); },
      [](pg::session&) -> prune_result { not_on_postgres("surge prune"); });
}

std::int64_t enable_incremental_vacuum(connection& db) {
  return on_backend(
      db, [&](SQLite::Database& file) { return enable_incremental_vacuum(file); },
      [](pg::session&) -> std::int64_t { not_on_postgres("surge prune --enable-vacuum"); });
}

}  // namespace surge::storage
