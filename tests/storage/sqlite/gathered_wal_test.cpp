#include "storage/sqlite/gathered_wal.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

#include <sqlite3.h>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Exception.h>
#include <gtest/gtest.h>

#include "storage/sqlite/database.hpp"
#include "tests/storage/test_db.hpp"

namespace surge::storage::sqlite {
namespace {

using testing::query_int;
using testing::query_text;

// The write calls (write, pwrite, writev, pwritev) this thread has made, as the kernel counts
// them.
std::int64_t write_calls() {
  std::ifstream io("/proc/thread-self/io");
  std::string field;
  std::int64_t value = 0;
  while (io >> field >> value) {
    if (field == "syscw:") return value;
  }
  ADD_FAILURE() << "no syscw in /proc/thread-self/io";
  return 0;
}

int count_frames(void* frames, sqlite3*, const char*, int in_wal) {
  *static_cast<int*>(frames) = in_wal;
  return SQLITE_OK;
}

struct transaction_cost {
  std::int64_t write_calls = 0;
  int frames = 0;
};

// Inserts `rows` rows of 3,000 bytes each in one transaction, a page each, and returns what its
// commit wrote. The table exists and the WAL has its header already.
transaction_cost insert_rows(SQLite::Database& db, int rows) {
  transaction_cost cost;
  int frames_before = 0;
  sqlite3_wal_hook(db.getHandle(), count_frames, &frames_before);
  db.exec("INSERT INTO t (b) VALUES (zeroblob(10))");
  sqlite3_wal_hook(db.getHandle(), count_frames, &cost.frames);
  const std::int64_t before = write_calls();
  db.exec("BEGIN");
  db.exec("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < " +
          std::to_string(rows) + ") INSERT INTO t (b) SELECT randomblob(3000) FROM n");
  db.exec("COMMIT");
  cost.write_calls = write_calls() - before;
  cost.frames -= frames_before;
  sqlite3_wal_hook(db.getHandle(), nullptr, nullptr);
  return cost;
}

// A connection as Surge opens one: through the gathering VFS.
SQLite::Database open_gathered(const std::string& path) {
  database_config config;
  config.path = path;
  return open_database(config);
}

void create_table(SQLite::Database& db) {
  db.exec("PRAGMA wal_autocheckpoint=0");
  db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB)");
}

// SQLite writes each frame in two calls; the gathering VFS writes a commit's frames in pieces
// of up to 128 KiB (31 frames of 4 KiB pages, what SQLite's unix VFS writes at once), the last
// ending with the commit frame's header, and then the commit frame's page.
TEST(GatheredWal, ACommitsFramesReachTheFileInPiecesOf31Frames) {
  testing::temp_dir dir;
  SQLite::Database plain(dir.file("plain.db"), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  plain.exec("PRAGMA journal_mode=WAL");
  plain.exec("PRAGMA synchronous=NORMAL");
  create_table(plain);
  const transaction_cost plain_cost = insert_rows(plain, 100);

  SQLite::Database gathered = open_gathered(dir.file("gathered.db"));
  create_table(gathered);
  const transaction_cost gathered_cost = insert_rows(gathered, 100);

  ASSERT_GE(plain_cost.frames, 100);
  EXPECT_EQ(gathered_cost.frames, plain_cost.frames);
  EXPECT_GE(plain_cost.write_calls, 2 * plain_cost.frames);
  const int pieces = (gathered_cost.frames + 30) / 31;
  EXPECT_EQ(gathered_cost.write_calls, pieces + 1) << gathered_cost.frames << " frames";
}

// The commit must be in the file when COMMIT returns: another connection reads it from there
// at once, and a process killed right after its commit has lost nothing, even when the
// transaction outgrew its page cache, wrote pages to the WAL early and rewrote them (SQLite then
// rewrites the frames' checksums, the commit frame's last).
TEST(GatheredWal, ACommitIsInTheFileWhenItReturnsEvenIfTheProcessDiesRightAfter) {
  testing::temp_dir dir;
  const std::string path = dir.file("queue.db");
  open_gathered(path).exec("CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, b BLOB)");
  for (const int cache_pages : {2000, 10}) {
    SCOPED_TRACE("cache of " + std::to_string(cache_pages) + " pages");
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      SQLite::Database db = open_gathered(path);
      db.exec("PRAGMA wal_autocheckpoint=0");
      db.exec("PRAGMA cache_size=" + std::to_string(cache_pages));
      db.exec("BEGIN");
      db.exec(
          "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000) "
          "INSERT INTO t (n, b) SELECT i, randomblob(1000) FROM n");
      db.exec("UPDATE t SET n = n + 1000000");  // pages written early are written again
      db.exec("COMMIT");
      SQLite::Database reader(path, SQLite::OPEN_READONLY);
      const bool seen = query_int(reader, "SELECT COUNT(*) FROM t WHERE n > 1000000") ==
                        query_int(db, "SELECT COUNT(*) FROM t");
      ::_exit(seen ? 0 : 3);  // without closing: no checkpoint, the WAL stays as it is
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "another connection did not see the commit at once";
    // The child is gone without a checkpoint: opening the file recovers the WAL from its frames.
    SQLite::Database reader(path, SQLite::OPEN_READONLY);
    EXPECT_EQ(query_int(reader, "SELECT COUNT(*) FROM t WHERE n > 1000000"),
              query_int(reader, "SELECT COUNT(*) FROM t"));
    EXPECT_GT(query_int(reader, "SELECT COUNT(*) FROM t"), 0);
    EXPECT_EQ(query_text(reader, "PRAGMA integrity_check"), "ok");
    SQLite::Database writer(path, SQLite::OPEN_READWRITE);
    writer.exec("UPDATE t SET n = n - 1000000");
  }
}

// A gathered write that fails (here the file-size limit, as a full disk would) fails the
// statement that made it: the transaction is rolled back and what was committed before stays.
TEST(GatheredWal, AWriteThatFailsFailsItsTransactionAndLosesNothingCommitted) {
  testing::temp_dir dir;
  const std::string path = dir.file("queue.db");
  {
    SQLite::Database db = open_gathered(path);
    db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB)");
    db.exec("INSERT INTO t (b) SELECT randomblob(100) FROM (SELECT 1 UNION SELECT 2)");
  }
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{1 << 20, 1 << 20};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    SQLite::Database db = open_gathered(path);
    db.exec("PRAGMA wal_autocheckpoint=0");
    try {
      db.exec("BEGIN");
      db.exec(
          "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 800) "
          "INSERT INTO t (b) SELECT randomblob(3000) FROM n");
      db.exec("COMMIT");
      ::_exit(3);  // 2.4 MB went into a file limited to 1 MiB
    } catch (const SQLite::Exception&) {
    }
    if (sqlite3_get_autocommit(db.getHandle()) == 0) db.exec("ROLLBACK");
    ::_exit(query_int(db, "SELECT COUNT(*) FROM t") == 2 ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "3: the commit succeeded; 4: the rows are not the 2 committed";
  SQLite::Database reader(path, SQLite::OPEN_READONLY);
  EXPECT_EQ(query_int(reader, "SELECT COUNT(*) FROM t"), 2);
  EXPECT_EQ(query_text(reader, "PRAGMA integrity_check"), "ok");
}

}  // namespace
}  // namespace surge::storage::sqlite
