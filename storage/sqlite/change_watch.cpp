#include "storage/sqlite/change_watch.hpp"

#include <algorithm>

#include "storage/sqlite/sql_support.hpp"

namespace surge::storage::sqlite {
namespace {

constexpr const char* version_sql = "PRAGMA data_version";
constexpr const char* max_id_sql = "SELECT COALESCE(MAX(id), 0) FROM webhook_delivery";
// A range of the rowid: reads the new rows only, however large the table.
constexpr const char* added_sql =
    "SELECT id, subscriber_id, status IN ('pending','retry') AND next_attempt_at <= :now "
    "FROM webhook_delivery WHERE id > :after ORDER BY id LIMIT :limit";

std::int64_t single_int(SQLite::Statement& statement) {
  sqlite::statement_use use(statement);
  statement.executeStep();
  return statement.getColumn(0).getInt64();
}

}  // namespace

const change_statements& seed000_change_statements() {
  static const change_statements statements{.max_id = max_id_sql, .added = added_sql};
  return statements;
}

change_watch::change_watch(SQLite::Database& db, std::size_t max_rows,
                           const change_statements& statements)
    : db_(db),
      max_rows_(std::max<std::size_t>(max_rows, 1)),
      version_(std::make_unique<SQLite::Statement>(db, version_sql)),
      max_id_(std::make_unique<SQLite::Statement>(db, statements.max_id)),
      added_(std::make_unique<SQLite::Statement>(db, statements.added)) {
  version_seen_ = read_version();
  highest_id_ = single_int(*max_id_);
}

change_watch::~change_watch() = default;

std::int64_t change_watch::read_version() { return single_int(*version_); }

new_rows change_watch::check(double now) {
  new_rows found;
  const auto version = read_version();
  if (version == version_seen_) return found;
  version_seen_ = version;
  found.changed = true;
  const auto highest = single_int(*max_id_);
  // Rows at the top deleted (a prune): ids may be handed out again from below what was seen.
  if (highest <= highest_id_) {
    highest_id_ = highest;
    return found;
  }
  auto& statement = *added_;
  sqlite::statement_use use(statement);
  statement.bind(":now", now);
  statement.bind(":after", highest_id_);
  statement.bind(":limit", static_cast<std::int64_t>(max_rows_) + 1);
  std::size_t read = 0;
  while (statement.executeStep()) {
    if (++read > max_rows_) {
      found.all = true;
      found.subscribers.clear();
      highest_id_ = highest;
      return found;
    }
    highest_id_ = statement.getColumn(0).getInt64();
    if (statement.getColumn(2).getInt() != 0) {
      found.subscribers.push_back(statement.getColumn(1).getInt64());
    }
  }
  // The reads above are two snapshots: the scan may see rows above `highest`, and a row
  // committed after the scan moves data_version again, so the next check finds it.
  highest_id_ = std::max(highest_id_, highest);
  std::sort(found.subscribers.begin(), found.subscribers.end());
  found.subscribers.erase(std::unique(found.subscribers.begin(), found.subscribers.end()),
                          found.subscribers.end());
  return found;
}

}  // namespace surge::storage::sqlite
