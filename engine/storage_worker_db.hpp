#pragma once
// The storage thread's connection and what it prepared on it; private to the storage_worker
// sources (split by job: storage_worker.cpp runs the thread, storage_checks.cpp the reads).
#include <optional>

#include <SQLiteCpp/Database.h>

#include "engine/config.hpp"
#include "engine/storage_worker.hpp"
#include "storage/claims.hpp"
#include "storage/database.hpp"
#include "storage/outcomes.hpp"

namespace surge::engine {

struct storage_worker::db_state {
  db_state(const storage_worker_config& config, const storage::interruptible_wait& lock_wait)
      : db(storage::open_database({.path = config.db_path,
                                   .busy_timeout = config.busy_timeout,
                                   .create_if_missing = false,
                                   .lock_wait = &lock_wait})),
        file(storage::identify_file(config.db_path)),
        claims(db),
        writer(db) {}
  SQLite::Database db;
  std::optional<storage::file_identity> file;  // what the path named when it was opened
  storage::claimer claims;
  storage::outcome_writer writer;
};

}  // namespace surge::engine
