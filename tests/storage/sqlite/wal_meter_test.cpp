// The WAL frame count behind `surge_wal_frames_total` and bench/storage_io.py, on a real file.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <SQLiteCpp/Transaction.h>

#include "storage/sqlite/checkpointer.hpp"
#include "storage/sqlite/wal_meter.hpp"
#include "tests/storage/test_db.hpp"

namespace surge::storage::sqlite {
namespace {

using testing::query_int;

class WalMeter : public ::testing::Test {
 protected:
  testing::temp_dir dir_;
  std::string path_ = dir_.file("queue.db");
  SQLite::Database db_ = testing::open_migrated(path_);
};

// A long checkpoint interval must not fill a nearly full disk with WAL: past a quarter of the
// free space the threshold shrinks with it, down to a floor.
TEST(CheckpointFrames, ShrinkToAQuarterOfTheFreeSpace) {
  constexpr int page = 4096;
  constexpr std::uint64_t frame = page + 24;
  EXPECT_EQ(checkpoint_frames_for(16000, 10ull << 30, page), 16000);  // 10 GiB free
  EXPECT_EQ(checkpoint_frames_for(16000, 4 * 16000 * frame, page), 16000);
  EXPECT_EQ(checkpoint_frames_for(16000, 4 * 16000 * frame - 1, page), 15999);
  EXPECT_EQ(checkpoint_frames_for(16000, 8ull << 20, page),
            static_cast<int>((8ull << 20) / 4 / frame));
  EXPECT_EQ(checkpoint_frames_for(16000, 0, page), min_checkpoint_frames);
  EXPECT_EQ(checkpoint_frames_for(50, 0, page), 50) << "never above what was configured";
  EXPECT_EQ(checkpoint_frames_for(16000, 1 << 20, 0), 16000) << "an unknown page size";
}

TEST_F(WalMeter, CountsThePagesEachCommitWrites) {
  const auto sub = testing::insert_subscriber_old(db_);
  testing::insert_deliveries_old(db_, sub, 50, 10);
  wal_meter meter(db_, {});
  // One row changes: its table page, nothing else (locked_until is in no index).
  db_.exec("UPDATE webhook_delivery SET locked_until = 5 WHERE id = 1");
  EXPECT_EQ(meter.commits(), 1);
  EXPECT_EQ(meter.frames(), 1);
  // A status change also moves the row out of both due indexes: three pages.
  db_.exec("UPDATE webhook_delivery SET status = 'done' WHERE id = 2");
  EXPECT_EQ(meter.commits(), 2);
  EXPECT_EQ(meter.frames(), 4);
  // A read-only statement commits nothing.
  EXPECT_EQ(query_int(db_, "SELECT count(*) FROM webhook_delivery"), 50);
  EXPECT_EQ(meter.commits(), 2);
}

TEST_F(WalMeter, SamePageTwiceInOneTransactionIsOneFrame) {
  const auto sub = testing::insert_subscriber_old(db_);
  testing::insert_deliveries_old(db_, sub, 5, 10);
  wal_meter meter(db_, {});
  SQLite::Transaction transaction(db_, SQLite::TransactionBehavior::IMMEDIATE);
  db_.exec("UPDATE webhook_delivery SET locked_until = 5 WHERE id = 1");
  db_.exec("UPDATE webhook_delivery SET locked_until = 0 WHERE id = 2");
  transaction.commit();
  EXPECT_EQ(meter.frames(), 1);
}

TEST_F(WalMeter, ACheckpointWantedPastTheThreshold) {
  const auto sub = testing::insert_subscriber_old(db_);
  testing::insert_deliveries_old(db_, sub, 5, 10);
  int wanted = 0;
  wal_meter meter(db_, {.checkpoint_frames = 3, .checkpoint_on_commit = false});
  meter.on_checkpoint_wanted([&wanted] { ++wanted; });
  db_.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  db_.exec("UPDATE webhook_delivery SET locked_until = 5 WHERE id = 1");
  EXPECT_EQ(wanted, 0);
  db_.exec("UPDATE webhook_delivery SET status = 'done' WHERE id = 2");
  EXPECT_EQ(wanted, 1);
  // Not checkpointed by the commit: the WAL keeps growing until someone does.
  EXPECT_EQ(meter.wal_frames(), 4);
}

TEST_F(WalMeter, TheCheckpointerCopiesTheWalIntoTheFileOnItsOwnConnection) {
  const auto sub = testing::insert_subscriber_old(db_);
  wal_meter meter(db_, {.checkpoint_frames = 5, .checkpoint_on_commit = false});
  checkpointer checkpoints(path_);
  meter.on_checkpoint_wanted([&checkpoints] { checkpoints.request(); });
  testing::insert_deliveries_old(db_, sub, 200, 10);
  // Waits for the thread (the wait is not what is tested; a stalled machine only makes it late).
  for (int i = 0; i < 1000 && checkpoints.runs() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(checkpoints.runs(), 1);
  // Everything in the WAL is already in the main file: a checkpoint now has nothing to copy.
  SQLite::Statement check(db_, "PRAGMA wal_checkpoint(PASSIVE)");
  ASSERT_TRUE(check.executeStep());
  EXPECT_EQ(check.getColumn(0).getInt(), 0);                            // not busy
  EXPECT_EQ(check.getColumn(1).getInt(), check.getColumn(2).getInt());  // all copied
  EXPECT_GT(check.getColumn(1).getInt(), 0);                            // and there was a WAL
}

}  // namespace
}  // namespace surge::storage::sqlite
