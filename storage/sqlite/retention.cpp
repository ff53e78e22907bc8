#include "storage/sqlite/retention.hpp"

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include "proto/clock.hpp"
#include "storage/sqlite/database.hpp"

namespace surge::storage::sqlite {
namespace {

using clock = std::chrono::steady_clock;

// Times how long one write transaction holds the lock: from BEGIN IMMEDIATE succeeding to
// COMMIT.
class timed_write {
 public:
  timed_write(SQLite::Database& db, prune_result& result,
              std::vector<std::chrono::microseconds>& held)
      : db_(db),
        result_(result),
        held_(held),
        transaction_(db, SQLite::TransactionBehavior::IMMEDIATE),
        start_(clock::now()) {}
  void commit() {
    transaction_.commit();
    const auto held = std::chrono::duration_cast<std::chrono::microseconds>(clock::now() - start_);
    result_.longest_transaction = std::max(result_.longest_transaction, held);
    ++result_.transactions;
    held_.push_back(held);
    // Checkpoint between transactions ourselves (auto-checkpoint is off for this connection),
    // so copying the WAL back never happens inside a commit.
    if (result_.transactions % 20 == 0) db_.exec("PRAGMA wal_checkpoint(PASSIVE)");
  }

 private:
  SQLite::Database& db_;
  prune_result& result_;
  std::vector<std::chrono::microseconds>& held_;
  SQLite::Transaction transaction_;
  clock::time_point start_;
};

std::string placeholders(std::size_t count) {
  std::string out;
  for (std::size_t i = 0; i < count; ++i) out += i ? ",?" : "?";
  return out;
}

// Candidate ids are found outside the write lock (a WAL reader blocks nobody); the delete
// re-checks every condition under the lock, so a row that changed in between is left alone.
std::vector<std::int64_t> next_ids(SQLite::Statement& query, std::int64_t after, double now = 0) {
  query.reset();
  query.bind(1, after);
  if (now > 0) query.bind(3, now);
  std::vector<std::int64_t> ids;
  while (query.executeStep()) ids.push_back(query.getColumn(0).getInt64());
  return ids;
}

void prune_deliveries(SQLite::Database& db, const prune_options& o, const delivery_table& table,
                      prune_result& result, std::vector<std::chrono::microseconds>& held,
                      const std::function<void(const prune_result&)>& progress) {
  const std::string finished = o.dead ? table.done_or_dead : table.done;
  const std::string old_enough =
      finished + " AND " + table.finished_at + " < ?2 AND " + table.free_at("?3");
  SQLite::Statement find(db, "SELECT id FROM " + std::string(table.name) + " WHERE id > ?1 AND " +
                                 old_enough + " ORDER BY id LIMIT ?4");
  find.bind(2, o.cutoff);
  find.bind(4, o.batch_rows);
  std::int64_t after = 0;
  for (;;) {
    const auto ids = next_ids(find, after, proto::unix_now());
    if (ids.empty()) break;
    after = ids.back();
    timed_write write(db, result, held);
    SQLite::Statement remove(db, "DELETE FROM " + std::string(table.name) + " WHERE id IN (" +
                                     placeholders(ids.size()) + ") AND (" + finished + ") AND " +
                                     table.finished_at + " < ? AND " + table.free_at("?"));
    int index = 1;
    for (const auto id : ids) remove.bind(index++, id);
    remove.bind(index++, o.cutoff);
    remove.bind(index, proto::unix_now());
    result.deliveries += remove.exec();
    write.commit();
    if (progress) progress(result);
    std::this_thread::sleep_for(o.pause);
  }
}

// Rows of Surge's own table `own` (id column `id`, naming its delivery in `delivery_id`) whose
// delivery is gone and that meet `condition` (?2 binds `cutoff` when it uses it), in batches;
// each batch's count is added to `removed` before `progress` is called.
void prune_orphans(SQLite::Database& db, const prune_options& o, const std::string& own,
                   const std::string& id, const std::string& condition, const delivery_table& table,
                   std::int64_t& removed, prune_result& result,
                   std::vector<std::chrono::microseconds>& held,
                   const std::function<void(const prune_result&)>& progress) {
  if (!db.tableExists(own)) return;
  // The tables have no index on delivery_id; walking one by its own key in batches keeps every
  // step a range scan plus one primary-key probe per row.
  SQLite::Statement find(db, "SELECT a." + id + " FROM " + own + " a WHERE a." + id + " > ?1 AND " +
                                 condition + " AND NOT EXISTS (SELECT 1 FROM " + table.name +
                                 " d WHERE d.id = a.delivery_id) ORDER BY a." + id + " LIMIT ?3");
  if (condition.find("?2") != std::string::npos) find.bind(2, o.cutoff);
  find.bind(3, o.batch_rows);
  std::int64_t after = 0;
  for (;;) {
    const auto ids = next_ids(find, after);
    if (ids.empty()) break;
    after = ids.back();
    timed_write write(db, result, held);
    // Such rows are only ever inserted for rows that exist, so the found ids need no re-check.
    SQLite::Statement remove(
        db, "DELETE FROM " + own + " WHERE " + id + " IN (" + placeholders(ids.size()) + ")");
    int index = 1;
    for (const auto row : ids) remove.bind(index++, row);
    removed += remove.exec();
    write.commit();
    if (progress) progress(result);
    std::this_thread::sleep_for(o.pause);
  }
}

void prune_attempts(SQLite::Database& db, const prune_options& o, const delivery_table& table,
                    prune_result& result, std::vector<std::chrono::microseconds>& held,
                    const std::function<void(const prune_result&)>& progress) {
  prune_orphans(db, o, "surge_attempt", "id", "a.finished_at < ?2", table, result.attempts, result,
                held, progress);
  if (table.notes != nullptr) {
    std::int64_t notes = 0;
    prune_orphans(db, o, table.notes, "delivery_id", "1", table, notes, result, held, progress);
  }
}

void reclaim(SQLite::Database& db, const prune_options& o, prune_result& result,
             std::vector<std::chrono::microseconds>& held) {
  result.incremental_vacuum = db.execAndGet("PRAGMA auto_vacuum").getInt() == 2;
  if (result.incremental_vacuum && o.vacuum_pages > 0) {
    for (;;) {
      const auto before = db.execAndGet("PRAGMA freelist_count").getInt64();
      if (before == 0) break;
      timed_write write(db, result, held);
      db.exec("PRAGMA incremental_vacuum(" + std::to_string(o.vacuum_pages) + ")");
      write.commit();
      const auto after = db.execAndGet("PRAGMA freelist_count").getInt64();
      result.pages_reclaimed += before - after;
      if (after >= before) break;
      std::this_thread::sleep_for(o.pause);
    }
  }
  result.free_pages = db.execAndGet("PRAGMA freelist_count").getInt64();
  // Copy the last batches back from the WAL. PASSIVE, because FULL, RESTART and TRUNCATE block
  // new writers while a reader holds an old snapshot, up to the busy timeout. The WAL keeps its
  // size (about 20 batches) until a writer starts it over.
  db.exec("PRAGMA wal_checkpoint(PASSIVE)");
}

}  // namespace

prune_result prune(SQLite::Database& db, const prune_options& options,
                   const std::function<void(const prune_result&)>& progress) {
  return prune(db, options, progress, seed000_deliveries());
}

prune_result prune(SQLite::Database& db, const prune_options& options,
                   const std::function<void(const prune_result&)>& progress,
                   const delivery_table& table) {
  prune_result result;
  std::vector<std::chrono::microseconds> held;
  db.exec("PRAGMA wal_autocheckpoint=0");
  prune_deliveries(db, options, table, result, held, progress);
  prune_attempts(db, options, table, result, held, progress);
  reclaim(db, options, result, held);
  db.exec("PRAGMA wal_autocheckpoint=1000");  // SQLite's default
  if (!held.empty()) {
    std::sort(held.begin(), held.end());
    result.median_transaction = held[held.size() / 2];
    result.p99_transaction = held[std::min(held.size() - 1, held.size() * 99 / 100)];
  }
  return result;
}

std::int64_t enable_incremental_vacuum(SQLite::Database& db) {
  db.exec("PRAGMA auto_vacuum = INCREMENTAL");
  db.exec("VACUUM");
  // VACUUM wrote the whole file through the WAL; this one-off already held the lock for the
  // rewrite, so it may also wait to truncate the WAL (a passive checkpoint leaves its size).
  db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  return db.execAndGet("PRAGMA page_count").getInt64();
}

}  // namespace surge::storage::sqlite
