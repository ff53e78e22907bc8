// Nothing is lost and nothing is sent twice by two drainers: the steady-state drainer running
// beside Surge, and SIGTERM mid-drain. kill -9 and restarts are in drain_faults_queue_test.cpp.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <set>
#include <thread>

#include <SQLiteCpp/Statement.h>

#include "proto/clock.hpp"
#include "storage/sqlite/database.hpp"
#include "tests/support/e2e.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;

std::int64_t leased_rows(test_queue& queue) {
  SQLite::Statement query(queue.db(),
                          "SELECT COUNT(*) FROM webhook_delivery WHERE locked_until > ? "
                          "AND status IN ('pending', 'retry')");
  query.bind(1, proto::unix_now());
  query.executeStep();
  return query.getColumn(0).getInt64();
}

TEST(DrainSafety, TheOtherDrainerNeverDeliversARowSurgeDelivers) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path(), {.behaviours_json = R"({"*": {"delay_ms": 5}})"});
  std::set<std::int64_t> all;
  for (int i = 0; i < 3; ++i) {
    const auto id = queue.add_subscriber_at(sink, 2000, 200);
    for (auto row : queue.add_rows(id, 1500)) all.insert(row);
  }
  const std::string other_out = dir.file("other.txt");
  tools::child_process other(SURGE_OTHER_DRAINER_PATH,
                             {"--db", queue.path(), "--batch", "50", "--sleep-ms", "20", "--out",
                              other_out, "--until-empty"},
                             dir.file("other.out"), dir.file("other.err"));
  const auto result = run_surge(dir, {"drain", "--db", queue.path(), "--until-drained",
                                      "--allow-private-targets", "--progress-interval", "0"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  ASSERT_EQ(other.wait(60s).value_or(-1), 0);

  std::set<std::int64_t> by_other;
  std::ifstream in(other_out);
  for (std::int64_t id; in >> id;) by_other.insert(id);
  const auto by_surge = deliveries(sink.stop_and_read());
  EXPECT_FALSE(by_other.empty()) << "the other drainer took no rows; the test proves nothing";
  EXPECT_FALSE(by_surge.empty());
  for (const auto& [id, count] : by_surge) {
    EXPECT_EQ(count, 1) << "Surge sent delivery " << id << " twice";
    EXPECT_EQ(by_other.count(id), 0u) << "delivery " << id << " was sent by both drainers";
  }
  EXPECT_EQ(by_surge.size() + by_other.size(), all.size());
  EXPECT_EQ(queue.count_by_status()["done"], static_cast<std::int64_t>(all.size()));
}

TEST(DrainSafety, SigtermMidDrainLosesNothingAndLeavesNoLease) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path(), {.behaviours_json = R"({"*": {"delay_ms": 200}})"});
  const auto id = queue.add_subscriber_at(sink, 1000, 100);
  const auto rows = queue.add_rows(id, 400);

  tools::child_process drain(surge_binary(),
                             {"drain", "--db", queue.path(), "--allow-private-targets",
                              "--per-subscriber-in-flight", "20", "--progress-interval", "0"},
                             dir.file("drain.out"), dir.file("drain.err"));
  // Mid-drain: something delivered, most of the 400 rows (4 s at 100/s) still to go.
  ASSERT_TRUE(eventually([&] { return queue.count_by_status()["done"] > 0; }, 20s))
      << "the drain delivered nothing";
  drain.signal(SIGTERM);
  ASSERT_EQ(drain.wait(20s).value_or(-1), 0);
  EXPECT_EQ(leased_rows(queue), 0) << "SIGTERM left rows leased";
  const auto done_before = queue.count_by_status()["done"];
  EXPECT_GT(done_before, 0);
  EXPECT_LT(done_before, static_cast<std::int64_t>(rows.size()));

  const auto result =
      run_surge(dir, {"drain", "--db", queue.path(), "--until-drained", "--allow-private-targets",
                      "--progress-interval", "0", "--per-subscriber-in-flight", "50"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto per_delivery = deliveries(sink.stop_and_read());
  EXPECT_EQ(per_delivery.size(), rows.size());
  for (const auto& [delivery, count] : per_delivery) {
    EXPECT_EQ(count, 1) << "a graceful stop must not cause duplicates: " << delivery;
  }
  EXPECT_EQ(queue.count_by_status()["done"], static_cast<std::int64_t>(rows.size()));
}

}  // namespace
}  // namespace surge::testing
