#pragma once
// What a drain's storage does differently on each queue shape on SQLite: the statements of the
// claim, the persisted buckets and the new-row watch, the outcome writer, and the housekeeping
// reads and writes. Everything else (the cycle, the sweep, lease values and fences, ownership,
// the WAL and its checkpoints) is shared by storage/sqlite/drain_store.cpp. Private to storage/.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <SQLiteCpp/Database.h>

#include "proto/id_set.hpp"
#include "storage/queue_shape.hpp"
#include "storage/sqlite/change_watch.hpp"
#include "storage/sqlite/claims.hpp"
#include "storage/sqlite/delivery_table.hpp"
#include "storage/sqlite/maintenance.hpp"
#include "storage/sqlite/outcomes.hpp"
#include "storage/sqlite/subscribers.hpp"
#include "storage/sqlite/token_leases.hpp"

namespace surge::storage::sqlite {

struct sqlite_queue_shape {
  const claim_statements& claims;
  const bucket_statements& buckets;
  const change_statements& new_rows;
  const delivery_table& deliveries;
  std::unique_ptr<outcome_applier> (*make_writer)(SQLite::Database& db);
};

// seed000's (storage/sqlite/drain_store.cpp) and seed001's (storage/seed001/drain_shape.cpp).
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
