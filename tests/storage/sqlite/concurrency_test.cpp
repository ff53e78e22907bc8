// Several connections on one real file, in one process: leases, fences and the write lock.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <SQLiteCpp/Exception.h>
#include <SQLiteCpp/Transaction.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include "proto/clock.hpp"
#include "storage/sqlite/claims.hpp"
#include "storage/sqlite/database.hpp"
#include "storage/sqlite/outcomes.hpp"
#include "storage/sqlite/queue.hpp"
#include "tests/storage/test_db.hpp"
#include "tests/storage/sqlite/other_drainer_sql.hpp"

namespace surge::storage::sqlite {
namespace {

using testing::query_double;
using testing::query_int;
using testing::query_text;

std::vector<subscriber_demand> demand_for(const std::vector<std::int64_t>& subscribers, int rows) {
  std::vector<subscriber_demand> demand;
  for (const auto id : subscribers) demand.push_back({id, rows});
  return demand;
}

outcome done_outcome(const claimed_row& row, double now) {
  outcome out;
  out.delivery_id = row.id;
  out.lease = row.lease;
  out.kind = outcome_kind::done;
  out.attempts = row.attempts + 1;
  out.last_status = 200;
  out.finished_at = now;
  out.has_attempt = true;
  out.attempt = {row.id, row.subscriber_id, row.attempts + 1, now, now, 200, ""};
  return out;
}

class Concurrency : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 3; ++i) {
      const auto sub = testing::insert_subscriber_old(db_);
      subscribers_.push_back(sub);
      for (const auto id : testing::insert_deliveries_old(db_, sub, 200, 10 + i)) all_.insert(id);
    }
  }

  testing::temp_dir dir_;
  std::string path_ = dir_.file("queue.db");
  SQLite::Database db_ = testing::open_migrated(path_);
  std::vector<std::int64_t> subscribers_;
  std::set<std::int64_t> all_;
};

TEST_F(Concurrency, TwoConnectionsNeverHoldTheSameRow) {
  SQLite::Database other = testing::open_migrated(path_);
  claimer first(db_);
  claimer second(other);
  const auto demand = demand_for(subscribers_, 7);
  std::set<std::int64_t> claimed;
  for (int round = 0; round < 1000; ++round) {
    const double now = 1000 + round * 0.001;  // leases (30 s) outlive the loop
    const auto a = first.claim(demand, now, 30);
    const auto b = second.claim(demand, now, 30);
    for (const auto& row : a) EXPECT_TRUE(claimed.insert(row.id).second) << row.id;
    for (const auto& row : b) EXPECT_TRUE(claimed.insert(row.id).second) << row.id;
    if (a.empty() && b.empty()) break;
  }
  EXPECT_EQ(claimed, all_);
}

TEST_F(Concurrency, TwoThreadsDrainTheFileTogether) {
  auto drain = [this]() {
    SQLite::Database db = testing::open_migrated(path_);
    claimer claims(db);
    outcome_writer writer(db);
    std::vector<std::int64_t> seen;
    for (;;) {
      const double now = proto::unix_now();
      const auto rows = claims.claim(demand_for(subscribers_, 5), now, 30);
      if (rows.empty()) {
        if (count_outstanding(db, now) == 0) break;
        std::this_thread::yield();
        continue;
      }
      std::vector<outcome> batch;
      for (const auto& row : rows) batch.push_back(done_outcome(row, now));
      const auto report = writer.write(batch);
      EXPECT_TRUE(report.lost_leases.empty());
      for (const auto& row : rows) seen.push_back(row.id);
    }
    return seen;
  };
  auto first = std::async(std::launch::async, drain);
  auto second = std::async(std::launch::async, drain);
  std::multiset<std::int64_t> claimed;
  for (const auto id : first.get()) claimed.insert(id);
  for (const auto id : second.get()) claimed.insert(id);
  EXPECT_EQ(claimed.size(), all_.size());
  EXPECT_EQ(std::set<std::int64_t>(claimed.begin(), claimed.end()), all_);
  EXPECT_EQ(query_int(db_,
                      "SELECT COUNT(*) FROM webhook_delivery WHERE status = 'done' "
                      "AND attempts = 1 AND locked_until = 0"),
            static_cast<std::int64_t>(all_.size()));
}

TEST_F(Concurrency, LostLeaseMakesTheFencedWriteChangeNothing) {
  SQLite::Database other = testing::open_migrated(path_);
  claimer slow(db_);
  claimer fast(other);
  const std::vector<subscriber_demand> demand = {{subscribers_[0], 2}};
  const auto mine = slow.claim(demand, 1000, 30);
  ASSERT_EQ(mine.size(), 2u);
  // Our lease expired; someone else claims the same rows.
  const auto theirs = fast.claim(demand, 2000, 30);
  ASSERT_EQ(theirs.size(), 2u);
  EXPECT_EQ(theirs[0].id, mine[0].id);

  outcome_writer writer(db_);
  const std::vector<outcome> late = {done_outcome(mine[0], 2001), done_outcome(mine[1], 2001)};
  const auto report = writer.write(late);
  EXPECT_EQ(report.applied, 0);
  EXPECT_EQ(report.lost_leases, (std::vector<std::int64_t>{mine[0].id, mine[1].id}));
  const std::string row = " FROM webhook_delivery WHERE id = " + std::to_string(mine[0].id);
  EXPECT_EQ(query_text(db_, "SELECT status" + row), "pending");
  EXPECT_EQ(query_int(db_, "SELECT attempts" + row), 0);
  EXPECT_EQ(query_double(db_, "SELECT locked_until" + row), theirs[0].lease);
  EXPECT_EQ(query_int(db_, "SELECT COUNT(*) FROM surge_attempt"), 2);

  outcome_writer their_writer(other);
  const std::vector<outcome> current = {done_outcome(theirs[0], 2002)};
  EXPECT_EQ(their_writer.write(current).applied, 1);
}

TEST_F(Concurrency, LeaseRetakenByTheOtherDrainerIsNotOverwritten) {
  claimer claims(db_);
  const std::vector<subscriber_demand> demand = {{subscribers_[0], 200}};
  const auto mine = claims.claim(demand, 1000, 30);
  ASSERT_EQ(mine.size(), 200u);

  SQLite::Database old(path_, SQLite::OPEN_READWRITE, 5000);
  SQLite::Statement claim(old, other_drainer_sql::claim());
  claim.bind(1, 2030.0);
  claim.bind(2, 2000.0);
  claim.bind(3, 2000.0);
  claim.bind(4, 1000);
  EXPECT_EQ(claim.exec(), static_cast<int>(all_.size()));

  outcome_writer writer(db_);
  const std::vector<outcome> late = {done_outcome(mine[0], 2001)};
  EXPECT_EQ(writer.write(late).lost_leases, (std::vector<std::int64_t>{mine[0].id}));
  EXPECT_EQ(query_double(db_, "SELECT locked_until FROM webhook_delivery WHERE id = " +
                                  std::to_string(mine[0].id)),
            2030.0);
}

// Holds the write lock from its own connection for `hold`, or until release().
class lock_holder {
 public:
  lock_holder(const std::string& path, std::chrono::milliseconds hold) {
    std::promise<void> locked;
    auto is_locked = locked.get_future();
    thread_ = std::thread([this, path, hold, locked = std::move(locked)]() mutable {
      SQLite::Database db(path, SQLite::OPEN_READWRITE, 5000);
      SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
      locked.set_value();
      {
        std::unique_lock lock(mutex_);
        stop_.wait_for(lock, hold, [this] { return stopping_; });
      }
      released_ = true;  // before the commit: whoever gets the lock next must see this
      transaction.commit();
    });
    is_locked.wait();
  }
  ~lock_holder() {
    release();
    thread_.join();
  }
  lock_holder(const lock_holder&) = delete;
  lock_holder& operator=(const lock_holder&) = delete;

  void release() {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
    stop_.notify_all();
  }
  bool released() const { return released_; }

 private:
  std::mutex mutex_;
  std::condition_variable stop_;
  bool stopping_ = false;
  std::atomic<bool> released_{false};
  std::thread thread_;
};

std::vector<outcome> done_batch(claimer& claims, const std::vector<std::int64_t>& subscribers,
                                double now) {
  std::vector<outcome> batch;
  for (const auto& row : claims.claim(demand_for(subscribers, 3), now, 30)) {
    batch.push_back(done_outcome(row, now));
  }
  return batch;
}

TEST_F(Concurrency, LockHeldShorterThanTheBusyTimeoutIsWaitedOut) {
  claimer claims(db_);
  outcome_writer writer(db_);
  const auto batch = done_batch(claims, subscribers_, 1000);
  ASSERT_EQ(batch.size(), 9u);

  lock_holder holder(path_, std::chrono::milliseconds(300));
  write_report report;
  EXPECT_NO_THROW(report = writer.write(batch));  // busy timeout 5 s
  EXPECT_TRUE(holder.released());
  EXPECT_EQ(report.applied, 9);

  lock_holder again(path_, std::chrono::milliseconds(300));
  EXPECT_EQ(claims.claim(demand_for(subscribers_, 1), 1001, 30).size(), 3u);
  EXPECT_TRUE(again.released());
}

TEST_F(Concurrency, LockHeldPastTheBusyTimeoutSurfacesAsBusy) {
  SQLite::Database impatient = testing::open_migrated(path_, std::chrono::milliseconds(100));
  claimer claims(impatient);
  outcome_writer writer(impatient);
  const auto batch = done_batch(claims, subscribers_, 1000);
  {
    lock_holder holder(path_, std::chrono::minutes(1));
    try {
      writer.write(batch);
      ADD_FAILURE() << "write went through a held lock";
    } catch (const SQLite::Exception& error) {
      EXPECT_EQ(error.getErrorCode(), SQLITE_BUSY) << error.what();
    }
    EXPECT_THROW(claims.claim(demand_for(subscribers_, 1), 1001, 30), SQLite::Exception);
    EXPECT_FALSE(holder.released());
  }
  // Nothing was half-written, and the same writer works once the lock is free.
  EXPECT_EQ(query_int(db_, "SELECT COUNT(*) FROM webhook_delivery WHERE status = 'done'"), 0);
  EXPECT_EQ(writer.write(batch).applied, 9);
}

}  // namespace
}  // namespace surge::storage::sqlite
