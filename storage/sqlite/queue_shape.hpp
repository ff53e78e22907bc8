#pragma once
// What Surge does differently on each queue shape on SQLite, for the drain's store and the tools'
// connection alike: the statements of the claim, the persisted buckets and the new-row watch, the
// outcome writer, the migration, the queued rows and statistics, the subscribers' table and the
// index ordered claims read. Everything else (the cycle, the sweep, lease values and fences,
// ownership, dead letters, the audit, retention) is one code for both, reading the shape's
// delivery table. Private to storage/.
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include <SQLiteCpp/Database.h>

#include "proto/id_set.hpp"
#include "storage/queue.hpp"
#include "storage/queue_shape.hpp"
#include "storage/sqlite/change_watch.hpp"
#include "storage/sqlite/claims.hpp"
#include "storage/sqlite/delivery_table.hpp"
#include "storage/sqlite/ordered_keys.hpp"
#include "storage/sqlite/outcomes.hpp"
#include "storage/sqlite/token_leases.hpp"

namespace surge::storage::sqlite {

struct sqlite_queue_shape {
  const claim_statements& claims;
  const bucket_statements& buckets;
  const change_statements& new_rows;
  const delivery_table& deliveries;
  std::unique_ptr<outcome_applier> (*make_writer)(SQLite::Database& db);
  const ordered_index& ordered_claims;
  // Brings the file to the latest schema version (storage/sqlite/schema.hpp,
  // storage/seed001/queue.hpp): seed000's also creates the shape's tables where missing, seed001's
  // never touches them.
  int (*migrate)(SQLite::Database& db);
  std::int64_t (*emit_event)(SQLite::Database& db, std::string_view event_type,
                             std::string_view payload, double now, int count);
  queue_stats (*read_stats)(SQLite::Database& db, double now, const proto::id_set& which);
  std::optional<subscriber_row> (*load_subscriber)(SQLite::Database& db, std::int64_t id);
  std::int64_t (*add_subscriber)(SQLite::Database& db, const subscriber_row& row);
  bool (*update_subscriber)(SQLite::Database& db, const subscriber_row& row);
  bool (*set_subscriber_active)(SQLite::Database& db, std::int64_t id, bool active);
  // Whether rows can be coalesced: seed001 has no such state.
  bool coalesces;
};

// seed000's (storage/sqlite/queue_shape.cpp) and seed001's (storage/seed001/queue_shape.cpp).
const sqlite_queue_shape& seed000_sqlite_shape();
const sqlite_queue_shape& seed001_sqlite_shape();
inline const sqlite_queue_shape& sqlite_shape_of(queue_shape shape) {
  return shape == queue_shape::seed001 ? seed001_sqlite_shape() : seed000_sqlite_shape();
}

// The shape of the file `db` holds (`named`: the operator's choice), or storage::error with
// kind bad_shape.
queue_shape shape_of_file(SQLite::Database& db, std::optional<queue_shape> named,
                          const std::string& location);

}  // namespace surge::storage::sqlite
