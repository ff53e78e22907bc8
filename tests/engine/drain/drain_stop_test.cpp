// How a drain stops when the world is against it, through the real CLI: the database refusing
// writes during the stop, one stop request delivered twice by a supervisor, a person's second
// Ctrl-C, and the queue file deleted or replaced under a running drain.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <thread>

#include <sys/mount.h>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "proto/clock.hpp"
#include "storage/sqlite/database.hpp"
#include "tests/engine/drain/drain_faults_support.hpp"
#include "tests/support/e2e.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// A drain that keeps requests in flight to a slow sink, so that a stop has work to finish.
std::vector<std::string> slow_drain_args(const test_queue& queue, const std::string& grace) {
  return {"drain",
          "--db",
          queue.path(),
          "--allow-private-targets",
          "--progress-interval",
          "0",
          "--per-subscriber-in-flight",
          "20",
          "--grace",
          grace,
          "--lease",
          "5",
          "--attempt-timeout",
          "2",
          "--connect-timeout",
          "1"};
}

std::int64_t done_rows(test_queue& queue) { return queue.count_by_status()["done"]; }

// Waits until the drain has delivered something, so that it is mid-drain when the test acts.
void wait_for_first_delivery(test_queue& queue) {
  const auto until = steady::now() + 20s;
  while (done_rows(queue) == 0 && steady::now() < until) std::this_thread::sleep_for(50ms);
  ASSERT_GT(done_rows(queue), 0) << "the drain delivered nothing";
}

// Rows still leased now: none after a graceful stop.
std::int64_t leases_left(test_queue& queue) {
  SQLite::Statement leased(queue.db(),
                           "SELECT COUNT(*) FROM webhook_delivery WHERE locked_until > ?");
  leased.bind(1, proto::unix_now());
  return leased.executeStep() ? leased.getColumn(0).getInt64() : -1;
}

// After a stop that left outcomes unwritten: once their leases (5 s from each claim) expire, a
// new drain delivers every row, so nothing was lost.
void drain_again_once_leases_expire(const temp_dir& dir, test_queue& queue, std::size_t rows) {
  // Every lease was taken before now, so all have run out 5 s from now; 3 s more for a slow host.
  const auto until = steady::now() + 8s;
  while (leases_left(queue) > 0 && steady::now() < until) std::this_thread::sleep_for(100ms);
  ASSERT_EQ(leases_left(queue), 0) << "a lease outlived its 5 s";
  const auto rest =
      run_surge(dir, {"drain", "--db", queue.path(), "--until-drained", "--allow-private-targets",
                      "--progress-interval", "0", "--per-subscriber-in-flight", "50"});
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  EXPECT_EQ(done_rows(queue), static_cast<std::int64_t>(rows));
}

TEST(DrainStop, TheGracePeriodBoundsTheStopWhileAnotherProcessHoldsTheWriteLock) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path(), {.behaviours_json = R"({"*": {"delay_ms": 200}})"});
  const auto id = queue.add_subscriber_at(sink, 1000, 100);
  const auto rows = queue.add_rows(id, 300);
  tools::child_process drain(surge_binary(), slow_drain_args(queue, "2"), dir.file("drain.out"),
                             dir.file("drain.err"));
  wait_for_first_delivery(queue);

  // Another program takes the write lock and keeps it far longer than the grace period.
  auto locker = storage::sqlite::open_database({.path = queue.path(), .busy_timeout = 10s});
  locker.exec("BEGIN EXCLUSIVE");
  std::this_thread::sleep_for(500ms);  // attempts finish meanwhile; their outcomes wait
  drain.signal(SIGTERM);
  // Grace 2 s and one more second for the last writes; the bound here only tells a stop that
  // never comes from one that does (how long the stop takes is the timers' business).
  const auto exit_code = drain.wait(30s);
  locker.exec("ROLLBACK");
  ASSERT_TRUE(exit_code.has_value()) << "the drain did not stop while the lock was held";
  const auto err = read_file(dir.file("drain.err"));
  EXPECT_EQ(*exit_code, 1) << "unwritten outcomes must be reported in the exit code\n" << err;
  EXPECT_NE(err.find("before the database took the outcomes of"), std::string::npos) << err;
  EXPECT_NE(read_file(dir.file("drain.out")).find("unwritten="), std::string::npos);

  // Nothing is lost: the rows whose outcomes were not written keep their leases, expire, and
  // a later drain delivers them.
  drain_again_once_leases_expire(dir, queue, rows.size());
  const auto delivered = deliveries(sink.stop_and_read());
  for (const auto row : rows) EXPECT_GE(delivered.count(row), 1u) << "row " << row << " never sent";
}

// A small tmpfs of its own, so that the queue's disk can be filled without filling the machine's.
class small_disk {
 public:
  explicit small_disk(const std::string& path) : path_(path) {
    std::filesystem::create_directories(path);
    mounted_ = ::mount("tmpfs", path.c_str(), "tmpfs", 0, "size=8m") == 0;
  }
  ~small_disk() {
    // Lazily: the test's own connection to the queue may still be open.
    if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  // Writes a filler file until the disk refuses more.
  void fill() {
    std::ofstream filler(path_ + "/filler", std::ios::binary);
    const std::string block(64 * 1024, 'x');
    while (filler.write(block.data(), static_cast<std::streamsize>(block.size())) &&
           filler.flush()) {
    }
  }
  void free_space() { std::filesystem::remove(path_ + "/filler"); }

 private:
  std::string path_;
  bool mounted_ = false;
};

TEST(DrainStop, TheGracePeriodBoundsTheStopWhileTheDiskIsFull) {
  temp_dir dir;
  small_disk disk(dir.file("disk"));
  if (!disk.mounted()) GTEST_SKIP() << "mounting a small tmpfs needs root (CI runs as root)";
  test_queue queue(dir, "disk/queue.db");
  sink_process sink(dir, queue.path(), {.behaviours_json = R"({"*": {"delay_ms": 100}})"});
  const auto id = queue.add_subscriber_at(sink, 1000, 100);
  const auto rows = queue.add_rows(id, 3000);
  tools::child_process drain(surge_binary(), slow_drain_args(queue, "2"), dir.file("drain.out"),
                             dir.file("drain.err"));
  wait_for_first_delivery(queue);
  disk.fill();  // the WAL cannot grow from here on
  std::this_thread::sleep_for(1500ms);
  drain.signal(SIGTERM);
  const auto exit_code = drain.wait(30s);
  ASSERT_TRUE(exit_code.has_value()) << "the drain did not stop while the disk was full";
  const auto err = read_file(dir.file("drain.err"));
  EXPECT_NE(err.find("database or disk is full"), std::string::npos)
      << "the disk never refused a write, so this proves nothing\n"
      << err;
  EXPECT_TRUE(*exit_code == 0 || *exit_code == 1) << err;

  // With room again, and the leases of unwritten rows expired, a drain delivers the rest.
  disk.free_space();
  drain_again_once_leases_expire(dir, queue, rows.size());
}

TEST(DrainStop, APersonsSecondCtrlCEndsTheStopAtOnce) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path(), {.behaviours_json = R"({"*": {"hang": true}})"});
  const auto id = queue.add_subscriber_at(sink, 1000, 100);
  queue.add_rows(id, 100);
  // Attempts hang for their whole 10 s timeout, and the grace period would wait for them.
  tools::child_process drain(
      surge_binary(),
      {"drain", "--db", queue.path(), "--allow-private-targets", "--progress-interval", "0",
       "--grace", "30", "--lease", "30", "--attempt-timeout", "10"},
      dir.file("drain.out"), dir.file("drain.err"));
  // An attempt is hanging at the sink, so the first Ctrl-C's stop has something to wait for.
  ASSERT_TRUE(wait_for_requests(sink, 1, 20s)) << "the drain sent nothing";
  drain.signal(SIGINT);
  std::this_thread::sleep_for(700ms);
  ASSERT_FALSE(drain.wait(0ms).has_value()) << "the stop finished too early to test";
  drain.signal(SIGINT);
  const auto exit_code = drain.wait(3s);
  ASSERT_TRUE(exit_code.has_value()) << "a second Ctrl-C did not end the drain";
  EXPECT_EQ(*exit_code, 3) << read_file(dir.file("drain.err"));
}

// coreutils `timeout` signals its child and then its whole process group: one request, two
// signals within microseconds. Taken as a second signal, it would exit 3 and leave leases to
// expire.
TEST(DrainStop, TimeoutSignallingChildAndGroupIsOneStop) {
  const auto timeout_program = tools::find_program("timeout");
  if (!timeout_program) GTEST_SKIP() << "coreutils timeout is not installed";
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path(), {.behaviours_json = R"({"*": {"delay_ms": 300}})"});
  const auto id = queue.add_subscriber_at(sink, 1000, 100);
  const auto rows = queue.add_rows(id, 2000);
  std::vector<std::string> args{"--preserve-status", "-s", "TERM", "3", surge_binary()};
  for (auto& arg : slow_drain_args(queue, "10")) args.push_back(arg);
  tools::child_process supervised(*timeout_program, args, dir.file("drain.out"),
                                  dir.file("drain.err"));
  const auto exit_code = supervised.wait(30s);
  ASSERT_TRUE(exit_code.has_value());
  const auto err = read_file(dir.file("drain.err"));
  EXPECT_EQ(*exit_code, 0) << err;
  EXPECT_EQ(err.find("second signal"), std::string::npos) << err;
  EXPECT_EQ(leases_left(queue), 0) << "a graceful stop leaves no lease behind";
  EXPECT_GT(done_rows(queue), 0);
  EXPECT_LT(done_rows(queue), static_cast<std::int64_t>(rows.size()));
}

// A drain sending 2,000 rows to a receiver that answers in 300 ms, past its first delivery.
struct busy_drain {
  temp_dir dir;
  test_queue queue{dir};
  sink_process sink{dir, queue.path(), {.behaviours_json = R"({"*": {"delay_ms": 300}})"}};
  std::optional<tools::child_process> drain;
  busy_drain() {
    queue.add_rows(queue.add_subscriber_at(sink, 1000, 100), 2000);
    drain.emplace(surge_binary(), slow_drain_args(queue, "10"), dir.file("drain.out"),
                  dir.file("drain.err"));
    wait_for_first_delivery(queue);
  }
};

// An operator's SSH session drops: the drain gets SIGHUP and stops as on Ctrl-C, its unsent
// leases given back and its summary written, instead of dying with exit 129.
TEST(DrainStop, AHangUpStopsGracefully) {
  busy_drain run;
  run.drain->signal(SIGHUP);
  const auto exit_code = run.drain->wait(20s);
  ASSERT_TRUE(exit_code.has_value());
  const auto err = read_file(run.dir.file("drain.err"));
  EXPECT_EQ(*exit_code, 0) << err;
  EXPECT_NE(err.find("stopping: SIGHUP"), std::string::npos) << err;
  EXPECT_EQ(leases_left(run.queue), 0) << "a graceful stop leaves no lease behind";
}

class DrainQueueFile : public ::testing::TestWithParam<bool> {};

// The path no longer names the opened file: deleted (false) or replaced by a copy (true). A
// drain that went on writing into the unlinked file would record its outcomes nowhere and still
// exit 0 with "drained".
TEST_P(DrainQueueFile, GoneOrReplacedStopsTheDrainWithAnError) {
  const bool replace = GetParam();
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path(), {.behaviours_json = R"({"*": {"delay_ms": 100}})"});
  const auto id = queue.add_subscriber_at(sink, 1000, 100);
  queue.add_rows(id, 3000);
  auto args = slow_drain_args(queue, "5");
  args.push_back("--until-drained");
  tools::child_process drain(surge_binary(), args, dir.file("drain.out"), dir.file("drain.err"));
  wait_for_first_delivery(queue);
  if (replace) {
    const auto copy = dir.file("copy.db");
    std::filesystem::copy_file(queue.path(), copy);
    std::filesystem::rename(copy, queue.path());
  } else {
    std::filesystem::remove(queue.path());
  }
  const auto exit_code = drain.wait(15s);
  ASSERT_TRUE(exit_code.has_value()) << "the drain went on with its queue file gone";
  const auto err = read_file(dir.file("drain.err"));
  EXPECT_EQ(*exit_code, 1) << err;
  EXPECT_NE(err.find("was deleted or replaced while draining"), std::string::npos) << err;
  EXPECT_EQ(read_file(dir.file("drain.out")).find("(drained)"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(DeletedOrReplaced, DrainQueueFile, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Replaced" : "Deleted"; });

}  // namespace
}  // namespace surge::testing
