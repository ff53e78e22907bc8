#include "proto/clock.hpp"
#include "storage/sqlite/database.hpp"

#include <atomic>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include <SQLiteCpp/Exception.h>
#include <gtest/gtest.h>

#include "storage/sqlite/database.hpp"
#include "tests/storage/test_db.hpp"

namespace surge::storage::sqlite {
namespace {

using testing::query_int;
using testing::query_text;

TEST(Database, OpensInWalWithNormalSyncAndTheBusyTimeout) {
  testing::temp_dir dir;
  database_config config;
  config.path = dir.file("queue.db");
  config.busy_timeout = std::chrono::milliseconds(1234);
  SQLite::Database db = open_database(config);
  EXPECT_EQ(query_text(db, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(query_int(db, "PRAGMA synchronous"), 1);  // NORMAL
  EXPECT_EQ(query_int(db, "PRAGMA busy_timeout"), 1234);
}

// Two programs opening a new file at once (two `surge migrate`, a drain and `emit`) both switch
// it to WAL; those switches deadlock, and SQLite answers one of them SQLITE_BUSY without waiting.
// Every opener must still get the file, in WAL mode.
TEST(Database, OpenersOfANewFileAtOnceWaitForEachOther) {
  testing::temp_dir dir;
  for (int round = 0; round < 20; ++round) {
    const auto path = dir.file("queue" + std::to_string(round) + ".db");
    std::atomic<int> opened{0};
    std::vector<std::string> failures(4);
    std::vector<std::thread> openers;
    std::atomic<bool> go{false};
    for (std::size_t i = 0; i < failures.size(); ++i) {
      openers.emplace_back([&, i] {
        while (!go.load()) std::this_thread::yield();
        try {
          database_config config;
          config.path = path;
          config.busy_timeout = std::chrono::seconds(5);
          SQLite::Database db = open_database(config);
          if (query_text(db, "PRAGMA journal_mode") == "wal") ++opened;
        } catch (const std::exception& error) {
          failures[i] = error.what();
        }
      });
    }
    go.store(true);
    for (auto& opener : openers) opener.join();
    for (const auto& failure : failures) EXPECT_EQ(failure, "") << "round " << round;
    EXPECT_EQ(opened.load(), 4) << "round " << round;
  }
}

TEST(Database, ThePageCacheIsSizedAsConfigured) {
  testing::temp_dir dir;
  database_config config;
  config.path = dir.file("queue.db");
  SQLite::Database plain = open_database(config);
  SQLite::Database untouched(config.path);
  EXPECT_EQ(query_int(plain, "PRAGMA cache_size"), query_int(untouched, "PRAGMA cache_size"))
      << "0 keeps SQLite's own";
  config.cache_kib = 16 * 1024;  // the drain's (engine/config.hpp)
  SQLite::Database sized = open_database(config);
  EXPECT_EQ(query_int(sized, "PRAGMA cache_size"), -16 * 1024);
}

// SQLite's "database or disk is full" keeps a kind of its own, so that the drain's store can
// checkpoint at once (the WAL may be what filled the disk). max_page_count makes SQLite refuse
// to grow the file exactly as a full disk does, without one.
TEST(Database, AFullDatabaseIsReportedAsDiskFull) {
  testing::temp_dir dir;
  database_config config;
  config.path = dir.file("queue.db");
  SQLite::Database db = open_database(config);
  db.exec("CREATE TABLE t (b BLOB)");
  db.exec("PRAGMA max_page_count = " + std::to_string(query_int(db, "PRAGMA page_count")));
  try {
    db.exec("INSERT INTO t VALUES (zeroblob(100000))");
    FAIL() << "the insert grew a file limited to its size";
  } catch (const SQLite::Exception& failure) {
    EXPECT_EQ(from_sqlite(failure).what_kind(), error::kind::disk_full) << failure.what();
  }
}

TEST(Database, MissingFileIsAnErrorWithoutCreate) {
  testing::temp_dir dir;
  database_config config;
  config.path = dir.file("absent.db");
  config.create_if_missing = false;
  EXPECT_THROW(open_database(config), SQLite::Exception);
}

TEST(Database, ReadOnlyConnectionCannotWrite) {
  testing::temp_dir dir;
  const auto path = dir.file("queue.db");
  { testing::open_migrated(path); }
  database_config config;
  config.path = path;
  config.read_only = true;
  SQLite::Database db = open_database(config);
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM webhook_delivery"), 0);
  EXPECT_THROW(db.exec("DELETE FROM webhook_delivery"), SQLite::Exception);
}

TEST(Database, UnixNowIsWallClockSeconds) {
  const double before = static_cast<double>(std::time(nullptr));
  const double now = proto::unix_now();
  EXPECT_GE(now, before);
  EXPECT_LT(now, before + 2);
}

}  // namespace
}  // namespace surge::storage::sqlite
