// A fault that belongs to one row stays that row's, through the real CLI: another program's
// trigger refusing one row's outcome, or every change of it. The other rows are delivered and
// their outcomes reach the queue (docs/reliability.md). Rows deleted in flight and an attempts
// count at its column's limit are storage's (tests/storage/outcome_faults_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>

#include "storage/sqlite/database.hpp"
#include "tests/engine/drain/drain_faults_support.hpp"
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

}  // namespace
}  // namespace surge::testing
