// Rows and settings that could keep a drain waiting for ever, sit silently, or cost memory out
// of proportion to the flags: each gets a bounded, logged, counted outcome.
#include <gtest/gtest.h>

#include <string>

#include <SQLiteCpp/Statement.h>

#include "proto/clock.hpp"
#include "storage/sqlite/database.hpp"
#include "tests/support/e2e.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> drain_args(const test_queue& queue, std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"drain",
                                "--db",
                                queue.path(),
                                "--until-drained",
                                "--allow-private-targets",
                                "--progress-interval",
                                "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

int count_of(const std::string& text, const std::string& needle) {
  int count = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

void sql(test_queue& queue, const std::string& statement) { queue.db().exec(statement); }

// One fast subscriber on a sink with `good` ordinary rows and `bad` rows for a test to spoil
// with raw SQL, then a drain that must end on its own.
struct spoilt_queue {
  temp_dir dir;
  test_queue queue{dir};
  sink_process sink{dir, queue.path()};
  std::int64_t id = queue.add_subscriber_at(sink, 1000, 100);
  std::vector<std::int64_t> good;
  std::vector<std::int64_t> bad;
  spoilt_queue(int good_rows, int bad_rows)
      : good(queue.add_rows(id, good_rows)), bad(queue.add_rows(id, bad_rows)) {}
  void spoil(std::int64_t row, const std::string& assignment) {
    sql(queue, "UPDATE webhook_delivery SET " + assignment + " WHERE id = " + std::to_string(row));
  }
  // --duration only bounds a failure: a drain that waits for the bad rows would run to it.
  run_result drain_to_the_end() {
    auto result = run_surge(dir, drain_args(queue, {"--duration", "30"}), 60s);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    EXPECT_NE(result.out.find("(drained)"), std::string::npos) << result.out << result.err;
    for (const auto row : good) EXPECT_EQ(queue.row(row).status, "done");
    return result;
  }
};

TEST(DrainRows, RowsNoClaimCanMatchAreDeadLetteredNotWaitedFor) {
  spoilt_queue rows(3, 4);
  const auto& bad = rows.bad;
  auto& queue = rows.queue;
  rows.spoil(bad[0], "next_attempt_at = 'soon'");
  rows.spoil(bad[1], "next_attempt_at = ''");
  rows.spoil(bad[2], "locked_until = 'later'");
  rows.spoil(bad[3], "locked_until = 9e12");

  const auto result = rows.drain_to_the_end();
  const std::pair<std::int64_t, std::string> expected[] = {
      {bad[0], "malformed next_attempt_at: 'soon'"},
      {bad[1], "malformed next_attempt_at: ''"},
      {bad[2], "malformed locked_until: 'later'"},
      {bad[3], "implausible locked_until: 9000000000000.0"}};
  for (const auto& [row, reason] : expected) {
    const auto state = queue.row(row);
    EXPECT_EQ(state.status, "dead") << row;
    EXPECT_EQ(state.last_error.rfind(reason, 0), 0u) << state.last_error;
    EXPECT_EQ(state.locked_until, 0);
  }
  // One summary line for the sweep, not one per row, and the rows are in the dead count.
  EXPECT_EQ(count_of(result.err, "rows no claim could ever match"), 1) << result.err;
  EXPECT_NE(result.err.find("dead-lettered 4 rows"), std::string::npos) << result.err;
  EXPECT_NE(result.out.find("dead=4"), std::string::npos) << result.out;
}

TEST(DrainRows, WarnsWhenAnotherDrainHoldsLeasesOnTheSameSubscribers) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path());
  const auto shared = queue.add_subscriber_at(sink, 1000, 100);
  const auto mine = queue.add_subscriber_at(sink, 1000, 100);
  const auto held = queue.add_rows(shared, 2);
  queue.add_rows(mine, 2);
  // Another Surge process's claim, as its claimer records it.
  const double lease = proto::unix_now() + 300.5;
  sql(queue, "INSERT INTO surge_lease(lease, owner, claimed_at) VALUES (" + std::to_string(lease) +
                 ", 'surge@elsewhere:4242', " + std::to_string(proto::unix_now()) + ")");
  sql(queue,
      "UPDATE webhook_delivery SET locked_until = (SELECT lease FROM surge_lease) "
      "WHERE id IN (" +
          std::to_string(held[0]) + "," + std::to_string(held[1]) + ")");

  auto result = run_surge(dir, {"drain", "--db", queue.path(), "--allow-private-targets",
                                "--progress-interval", "0", "--duration", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(count_of(result.err, "another surge drain is live"), 1) << result.err;
  EXPECT_NE(result.err.find("surge@elsewhere:4242 holds 2 leased rows of subscriber " +
                            std::to_string(shared)),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("docs/operations.md"), std::string::npos) << result.err;
  // The leased rows are left to their holder.
  for (const auto row : held) EXPECT_EQ(queue.row(row).status, "pending");

  // A drain of other subscribers does not overlap: no warning.
  result = run_surge(dir, drain_args(queue, {"--subscribers", std::to_string(mine)}));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err.find("another surge drain"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace surge::testing
