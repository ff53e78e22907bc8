// A fault that belongs to one row stays that row's, through the real CLI: another program's
// trigger refusing one row's outcome, a row whose attempts count is at its column's limit, rows
// deleted while in flight, and rows whose payloads would not fit in memory all at once. The
// other rows are delivered and their outcomes reach the queue (docs/reliability.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#include "storage/sqlite/database.hpp"
#include "tests/engine/drain/drain_faults_support.hpp"
#include "tests/support/backends.hpp"
#include "tests/support/e2e.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;
constexpr auto npos = std::string::npos;

std::int64_t rows_with_status(test_queue& queue, const std::string& status) {
  return static_cast<std::int64_t>(
      queue.sql().number("SELECT COUNT(*) FROM webhook_delivery WHERE status = ?", {status}));
}

// Another program's trigger refuses to mark one row done. Before, every outcome batch holding it
// failed, so after the first few commits nothing more was written and the drain never ended.
TEST(DrainFaultsRows, ATriggerRefusingOneRowsOutcomeDeadLettersThatRowAndNothingElse) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path());
  const auto id = queue.add_subscriber_at(sink, 1000, 100);
  const auto rows = queue.add_rows(id, 400);
  const auto frozen = rows[20];
  queue.sql().exec(
      "CREATE TRIGGER refuse_done BEFORE UPDATE OF status ON webhook_delivery "
      "WHEN NEW.id = " +
      std::to_string(frozen) +
      " AND NEW.status = 'done' BEGIN SELECT RAISE(ABORT, 'row is frozen by audit'); "
      "END");
  const auto result = run_surge(dir, fast_drain(queue), 90s);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("(drained)"), npos) << result.out;
  EXPECT_EQ(rows_with_status(queue, "done"), 399) << result.err;
  const auto row = queue.row(frozen);
  EXPECT_EQ(row.status, "dead");
  EXPECT_NE(row.last_error.find("row is frozen by audit"), npos) << row.last_error;
  EXPECT_NE(result.err.find("row " + std::to_string(frozen)), npos) << result.err;
  // Each row was sent once: the outcomes of the others were not lost with the refused one's.
  const auto per_delivery = deliveries(sink.stop_and_read());
  EXPECT_EQ(per_delivery.size(), rows.size());
  for (const auto& [delivery, count] : per_delivery) EXPECT_EQ(count, 1) << delivery;
}

// The trigger refuses every change of the row, so not even a dead-letter can be written: the row
// is left to its lease and the others still go through.
// Sending it again at each lease expiry would only be refused again (8 times in 40 s before): the
// row is quarantined in the drain's memory, sent once, named, and counted in the exit code.
TEST(DrainFaultsRows, ARowWhoseEveryUpdateIsRefusedIsQuarantinedSentOnceAndTheOthersGoOn) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path());
  const auto id = queue.add_subscriber_at(sink, 1000, 100);
  const auto rows = queue.add_rows(id, 200);
  const auto frozen = rows[7];
  queue.sql().exec(
      "CREATE TRIGGER refuse_all BEFORE UPDATE OF status ON webhook_delivery "
      "WHEN NEW.id = " +
      std::to_string(frozen) + " BEGIN SELECT RAISE(ABORT, 'row is frozen'); END");
  // That it is never claimed again past its lease is the storage core's rule
  // (StorageCore.ARowRefusedEvenAsDeadIsQuarantinedAndNeverClaimedAgain); here, the drain's end:
  // --until-drained does not wait for it, names it, and exits 5 with every other row done.
  const auto result = run_surge(dir, fast_drain(queue), 90s);
  EXPECT_EQ(result.exit_code, 5) << result.err;
  EXPECT_EQ(rows_with_status(queue, "done"), 199) << result.err;
  EXPECT_EQ(queue.row(frozen).status, "pending");
  EXPECT_NE(result.err.find("is quarantined"), npos) << result.err;
  EXPECT_NE(result.out.find("quarantined: row " + std::to_string(frozen) + ":"), npos)
      << result.out;
  const auto requests = sink.stop_and_read();
  EXPECT_EQ(std::count_if(requests.begin(), requests.end(),
                          [&](const auto& r) { return r.delivery_id == frozen; }),
            1);
}

class DrainFaultsRowsOn : public ::testing::TestWithParam<backend> {};

// A row whose attempts column is at the most the column holds: the next count would overflow
// PostgreSQL's integer (the whole batch refused before) or wrap SQLite's 64 bits. The count is
// clamped, the row dies at its attempt limit, and every other row is done.
TEST_P(DrainFaultsRowsOn, AnAttemptsCountAtItsLimitNeitherOverflowsNorStopsTheOthers) {
  temp_dir dir;
  SURGE_QUEUE_FOR(GetParam(), dir, queue_held);
  auto& queue = *queue_held;
  sink_process sink(dir, queue.path(), {.behaviours_json = R"({"*": {"status": 500}})"});
  const auto failing = queue.add_subscriber_at(sink, 1000, 100);
  const auto worn = queue.add_rows(failing, 1).front();
  const std::string most = GetParam() == backend::postgres ? "2147483647" : "9223372036854775807";
  queue.sql().exec("UPDATE webhook_delivery SET attempts = " + most + " WHERE id = ?",
                   {std::to_string(worn)});
  sink_process good(dir, queue.path());
  const auto fine = queue.add_subscriber_at(good, 1000, 100);
  queue.add_rows(fine, 399);
  const auto result = run_surge(dir, fast_drain(queue), 90s);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(rows_with_status(queue, "done"), 399) << result.err;
  const auto row = queue.row(worn);
  EXPECT_EQ(row.status, "dead") << row.last_error;
  EXPECT_EQ(row.attempts, 2147483647) << "clamped to what every queue's column holds";
}

// An operator deletes a subscriber and its rows while some are in flight: their outcomes have
// nowhere to go, which the log says as it is, not as another drainer's doing.
TEST_P(DrainFaultsRowsOn, RowsDeletedWhileInFlightAreNamedAsDeleted) {
  temp_dir dir;
  SURGE_QUEUE_FOR(GetParam(), dir, queue_held);
  auto& queue = *queue_held;
  sink_process sink(dir, queue.path(), {.behaviours_json = R"({"*": {"delay_ms": 1500}})"});
  const auto id = queue.add_subscriber_at(sink, 1000, 100);
  queue.add_rows(id, 20);
  tools::child_process drain(surge_binary(), fast_drain(queue), dir.file("drain.out"),
                             dir.file("drain.err"));
  ASSERT_TRUE(wait_for_requests(sink, 5, 20s));
  queue.sql().exec("DELETE FROM webhook_delivery WHERE subscriber_id = ?", {std::to_string(id)});
  queue.sql().exec("DELETE FROM webhook_subscriber WHERE id = ?", {std::to_string(id)});
  ASSERT_EQ(drain.wait(60s).value_or(-1), 0) << read_file(dir.file("drain.err"));
  const auto err = read_file(dir.file("drain.err"));
  EXPECT_NE(err.find("were deleted from the queue while they were in flight"), npos) << err;
  EXPECT_EQ(err.find("another drainer took them"), npos) << err;
}

INSTANTIATE_TEST_SUITE_P(Backends, DrainFaultsRowsOn, all_backends(), backend_name);

}  // namespace
}  // namespace surge::testing
