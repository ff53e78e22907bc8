#include "storage/database.hpp"

#include <ctime>

#include <SQLiteCpp/Exception.h>
#include <gtest/gtest.h>

#include "test_db.hpp"

namespace surge::storage {
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
  const double now = unix_now();
  EXPECT_GE(now, before);
  EXPECT_LT(now, before + 2);
}

}  // namespace
}  // namespace surge::storage
