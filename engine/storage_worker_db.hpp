#pragma once
// The storage thread's connection and what it prepared on it; private to the storage_worker
// sources (split by job: storage_worker.cpp runs the thread, storage_checks.cpp the reads).
#include <optional>

#include <SQLiteCpp/Database.h>

#include "engine/config.hpp"
#include "engine/storage_worker.hpp"
#include "storage/change_watch.hpp"
#include "storage/checkpointer.hpp"
#include "storage/claims.hpp"
#include "storage/database.hpp"
#include "storage/outcomes.hpp"
#include "storage/ownership.hpp"
#include "storage/token_leases.hpp"
#include "storage/wal_meter.hpp"

namespace surge::engine {

struct storage_worker::db_state {
  db_state(const storage_worker_config& config, const storage::interruptible_wait& lock_wait,
           const proto::id_set& allowed)
      : db(storage::open_database({.path = config.db_path,
                                   .busy_timeout = config.busy_timeout,
                                   .create_if_missing = false,
                                   .cache_kib = config.cache_kib,
                                   .lock_wait = &lock_wait})),
        file(storage::identify_file(config.db_path)),
        checkpoints(config.db_path),
        claims(db),
        writer(db),
        tokens(db, std::chrono::duration<double>(config.token_reserve).count()),
        owners(db, claims.owner(), allowed,
               std::chrono::duration<double>(config.ownership_heartbeat).count()),
        wal(db, {.checkpoint_frames = config.checkpoint_frames, .checkpoint_on_commit = false}),
        changes(db) {
    wal.on_checkpoint_wanted([this] { checkpoints.request(); });
  }
  SQLite::Database db;
  std::optional<storage::file_identity> file;  // what the path named when it was opened
  storage::checkpointer checkpoints;  // before `wal`, whose hook calls it
  storage::claimer claims;
  storage::outcome_writer writer;
  storage::token_leaser tokens;
  storage::ownership_keeper owners;
  storage::wal_meter wal;
  storage::change_watch changes;  // rows other connections queue, for the wake
};

}  // namespace surge::engine
