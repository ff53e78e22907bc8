#pragma once
// Noticing rows that other connections queued, so a drain sends them at once instead of at the
// next idle poll. `PRAGMA data_version` on the claiming connection changes whenever
// another connection commits, and not for this connection's own commits, so one cheap pragma per
// storage loop says whether to look; the look reads only the rows above the highest id seen.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "storage/change_watch.hpp"

namespace surge::storage::sqlite {

// The delivery table's highest id, and (:now, :after, :limit) the rows above an id in id order:
// id, subscriber_id, and whether the row is due. One set per queue shape.
struct change_statements {
  std::string max_id;
  std::string added;
};
const change_statements& seed000_change_statements();

class change_watch {
 public:
  // Rows queued before the watch was made are not new. `max_rows` bounds what one look reads
  // (a bulk insert of a spike's backlog is reported as `all`, not listed).
  explicit change_watch(SQLite::Database& db, std::size_t max_rows = 10000,
                        const change_statements& statements = seed000_change_statements());
  ~change_watch();

  // Call outside a transaction (in one, data_version cannot move). Rows with ids above the
  // highest seen that are due at `now` (pending or retry); rows made due some other way (a
  // retry falling due, a lease given back) are left to the idle poll, which also backs this up.
  new_rows check(double now);

 private:
  std::int64_t read_version();

  SQLite::Database& db_;
  std::size_t max_rows_;
  std::unique_ptr<SQLite::Statement> version_;
  std::unique_ptr<SQLite::Statement> max_id_;
  std::unique_ptr<SQLite::Statement> added_;
  std::int64_t version_seen_ = 0;
  std::int64_t highest_id_ = 0;
};

}  // namespace surge::storage::sqlite
