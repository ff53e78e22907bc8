// Two processes on one file: a forked Surge claimer, and the other drainer program.
#include <chrono>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <poll.h>
#include <unistd.h>

#include "proto/clock.hpp"
#include "storage/sqlite/claims.hpp"
#include "storage/sqlite/database.hpp"
#include "storage/sqlite/outcomes.hpp"
#include "storage/sqlite/queue.hpp"
#include "tests/storage/test_db.hpp"

extern char** environ;

namespace surge::storage::sqlite {
namespace {

using testing::query_int;

constexpr int subscriber_count = 4;
constexpr int rows_per_subscriber = 500;

// Fills a file and closes it again: no connection may be open across fork().
std::set<std::int64_t> populate(const std::string& path, std::vector<std::int64_t>& subscribers) {
  SQLite::Database db = testing::open_migrated(path);
  std::set<std::int64_t> ids;
  for (int i = 0; i < subscriber_count; ++i) {
    const auto sub = testing::insert_subscriber_old(db);
    subscribers.push_back(sub);
    for (const auto id : testing::insert_deliveries_old(db, sub, rows_per_subscriber, 10 + i)) {
      ids.insert(id);
    }
  }
  return ids;
}

// Claims small batches and completes them until nothing is due or leased. Returns the ids it
// claimed; any lost lease is an error (nobody's lease expires during the test). `opened` runs
// once the connection is ready, to line up with the other process; `first_batch` after the
// first batch is written, so that both sides can be made to take part whatever the scheduling.
std::vector<std::int64_t> surge_drain(
    const std::string& path, const std::vector<std::int64_t>& subscribers,
    const std::function<void()>& opened = [] {}, const std::function<void()>& first_batch = [] {}) {
  SQLite::Database db = testing::open_migrated(path);
  claimer claims(db);
  outcome_writer writer(db);
  opened();
  std::vector<subscriber_demand> demand;
  for (const auto id : subscribers) demand.push_back({id, 5});
  std::vector<std::int64_t> seen;
  for (;;) {
    const double now = proto::unix_now();
    const auto rows = claims.claim(demand, now, 30);
    if (rows.empty()) {
      if (count_outstanding(db, now) == 0) return seen;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    std::vector<outcome> batch;
    for (const auto& row : rows) {
      outcome& out = batch.emplace_back();
      out.delivery_id = row.id;
      out.lease = row.lease;
      out.attempts = row.attempts + 1;
      out.last_status = 200;
      out.finished_at = now;
      seen.push_back(row.id);
    }
    if (!writer.write(batch).lost_leases.empty()) throw std::runtime_error("lost a lease");
    if (seen.size() == rows.size()) first_batch();
    // Leave the lock free for a moment, as the engine's storage thread does between batches.
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

std::vector<std::int64_t> read_ids(const std::string& file) {
  std::ifstream in(file);
  std::vector<std::int64_t> ids;
  for (std::int64_t id = 0; in >> id;) ids.push_back(id);
  return ids;
}

void write_ids(const std::string& file, const std::vector<std::int64_t>& ids) {
  std::ofstream out(file);
  for (const auto id : ids) out << id << '\n';
}

pid_t spawn_other_drainer(const std::vector<std::string>& args) {
  std::vector<std::string> all = {SURGE_OTHER_DRAINER_PATH};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& arg : all) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int error = posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
  EXPECT_EQ(error, 0) << "spawning " << argv[0];
  return error == 0 ? pid : -1;
}

int exit_code(pid_t pid) {
  int status = 0;
  if (pid <= 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void expect_each_once(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b,
                      const std::set<std::int64_t>& all) {
  std::multiset<std::int64_t> claimed(a.begin(), a.end());
  claimed.insert(b.begin(), b.end());
  EXPECT_EQ(claimed.size(), all.size());
  EXPECT_EQ(std::set<std::int64_t>(claimed.begin(), claimed.end()), all);
}

TEST(Processes, ForkedClaimersClaimEveryRowExactlyOnce) {
  testing::temp_dir dir;
  const auto path = dir.file("queue.db");
  std::vector<std::int64_t> subscribers;
  const auto all = populate(path, subscribers);
  const auto child_file = dir.file("child.ids");

  // Both sides open their connection, then start together: child says ready, parent says go.
  // After its first batch each side says so and waits (bounded) for the other's: under a slow
  // build (ASan, TSan) one side could otherwise take every row while the other sits in the busy
  // handler's sleep, and the test would not show two claimers side by side.
  int ready[2];
  int go[2];
  int child_claimed[2];
  int parent_claimed[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(child_claimed), 0);
  ASSERT_EQ(pipe(parent_claimed), 0);
  const auto meet = [](int tell_fd, int hear_fd) {
    char byte = 1;
    if (write(tell_fd, &byte, 1) != 1) return false;
    pollfd fd{hear_fd, POLLIN, 0};
    if (::poll(&fd, 1, 10000) == 1) (void)!read(hear_fd, &byte, 1);
    return true;
  };
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child reports through its exit code and a file; it never returns into gtest.
    int code = 0;
    try {
      const auto line_up = [&] {
        char byte = 1;
        if (write(ready[1], &byte, 1) != 1 || read(go[0], &byte, 1) != 1) _exit(3);
      };
      const auto first_batch = [&] {
        if (!meet(child_claimed[1], parent_claimed[0])) _exit(4);
      };
      write_ids(child_file, surge_drain(path, subscribers, line_up, first_batch));
    } catch (...) {
      code = 2;
    }
    _exit(code);
  }
  const auto mine = surge_drain(
      path, subscribers,
      [&] {
        char byte = 0;
        if (read(ready[0], &byte, 1) != 1 || write(go[1], &byte, 1) != 1) {
          throw std::runtime_error("child never got ready");
        }
      },
      [&] {
        if (!meet(parent_claimed[1], child_claimed[0])) throw std::runtime_error("child gone");
      });
  for (const int* p : {ready, go, child_claimed, parent_claimed}) {
    close(p[0]);
    close(p[1]);
  }
  ASSERT_EQ(exit_code(child), 0);

  const auto theirs = read_ids(child_file);
  expect_each_once(mine, theirs, all);
  EXPECT_FALSE(mine.empty());
  EXPECT_FALSE(theirs.empty());
  SQLite::Database db = testing::open_migrated(path);
  EXPECT_EQ(query_int(db,
                      "SELECT COUNT(*) FROM webhook_delivery WHERE status = 'done' "
                      "AND attempts = 1 AND locked_until = 0"),
            static_cast<std::int64_t>(all.size()));
}

TEST(Processes, SurgeAndTheOtherDrainerShareOneFile) {
  testing::temp_dir dir;
  const auto path = dir.file("queue.db");
  std::vector<std::int64_t> subscribers;
  const auto all = populate(path, subscribers);
  const auto out = dir.file("other.ids");

  const pid_t other = spawn_other_drainer(
      {"--db", path, "--batch", "20", "--until-empty", "--out", out, "--sleep-ms", "1"});
  ASSERT_GT(other, 0);
  // Start once the other drainer is under way, so the two really overlap.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (read_ids(out).empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const auto mine = surge_drain(path, subscribers);
  ASSERT_EQ(exit_code(other), 0);

  const auto theirs = read_ids(out);
  expect_each_once(mine, theirs, all);
  EXPECT_FALSE(theirs.empty());
  SQLite::Database db = testing::open_migrated(path);
  EXPECT_EQ(query_int(db,
                      "SELECT COUNT(*) FROM webhook_delivery WHERE status = 'done' "
                      "AND attempts = 1 AND locked_until = 0"),
            static_cast<std::int64_t>(all.size()));
  // The other drainer spent tokens from the persisted buckets.
  EXPECT_GT(query_int(db, "SELECT COUNT(*) FROM webhook_subscriber WHERE tokens_updated_at > 0"),
            0);
}

TEST(Processes, DrainerKilledAfterClaimingLeavesItsRowsLeased) {
  testing::temp_dir dir;
  const auto path = dir.file("queue.db");
  std::vector<std::int64_t> subscribers;
  const auto all = populate(path, subscribers);
  const auto out = dir.file("other.ids");

  const std::string only = std::to_string(subscribers[1]);
  ASSERT_EQ(exit_code(spawn_other_drainer({"--db", path, "--batch", "5", "--subscribers", only,
                                           "--exit-after-claim", "--out", out})),
            0);
  const auto taken = read_ids(out);
  ASSERT_EQ(taken.size(), 5u);

  SQLite::Database db = testing::open_migrated(path);
  for (const auto id : taken) {
    EXPECT_EQ(query_int(db, "SELECT subscriber_id FROM webhook_delivery WHERE id = " +
                                std::to_string(id)),
              subscribers[1]);
  }
  claimer claims(db);
  const std::vector<subscriber_demand> demand = {{subscribers[1], rows_per_subscriber}};
  const double now = proto::unix_now();
  std::set<std::int64_t> first;
  for (const auto& row : claims.claim(demand, now, 3600)) first.insert(row.id);
  EXPECT_EQ(first.size(), static_cast<std::size_t>(rows_per_subscriber) - taken.size());
  for (const auto id : taken) EXPECT_FALSE(first.contains(id));

  // Once the dead drainer's lease has run out, its rows are due again.
  std::vector<std::int64_t> retaken;
  for (const auto& row : claims.claim(demand, now + 31, 30)) retaken.push_back(row.id);
  EXPECT_EQ(std::set<std::int64_t>(retaken.begin(), retaken.end()),
            std::set<std::int64_t>(taken.begin(), taken.end()));
  EXPECT_EQ(all.size(), static_cast<std::size_t>(subscriber_count * rows_per_subscriber));
}

}  // namespace
}  // namespace surge::storage::sqlite
