// Limits are live: changed in the table while a drain runs, and handed over to and from the
// steady-state drainer through the persisted bucket columns. The origin's concurrency, its slots
// in turn, hanging requests and the process-wide cap are proved on the shard core's simulated
// clock (tests/engine/shard/core_partner_test.cpp, scheduling_test.cpp,
// tests/engine/limits/origin_limit_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <SQLiteCpp/Statement.h>

#include "proto/clock.hpp"
#include "storage/sqlite/database.hpp"
#include "tests/support/e2e.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;

std::vector<double> sorted_arrivals(const std::vector<sink_request>& requests) {
  std::vector<double> out;
  for (const auto& r : requests) out.push_back(r.arrival);
  std::sort(out.begin(), out.end());
  return out;
}

// A rate raised in the table while a drain runs applies at the next re-read of the subscribers
// (every 3 s), without a restart. At the old 4/s with a burst of 1, the 12 s of --duration let
// out at most 1 + 4 x 12 + 1 = 50 of the 60 rows: every row done proves the new rate took over,
// however slow the machine is up to that. The new limit holds in every window after the change.
TEST(DrainLimits, ARateChangedInTheTableAppliesWithoutARestart) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path());
  const auto id = queue.add_subscriber_at(sink, 4, 1);
  queue.add_rows(id, 60);

  tools::child_process drain(surge_binary(),
                             {"drain", "--db", queue.path(), "--allow-private-targets",
                              "--until-drained", "--duration", "12", "--progress-interval", "0"},
                             dir.file("drain.out"), dir.file("drain.err"));
  // Sending at the old rate first (waited for by count: the drain may start late).
  eventually([&] { return queue.count_by_status()["done"] >= 2; }, 60s);
  const double changed_at = proto::unix_now();
  const auto set = run_surge(dir, {"subscriber", "set", "--db", queue.path(), std::to_string(id),
                                   "--rate", "40", "--burst", "1"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  ASSERT_EQ(drain.wait(60s).value_or(-1), 0);

  const auto arrivals = sorted_arrivals(sink.stop_and_read());
  EXPECT_EQ(queue.count_by_status()["done"], 60) << "the old rate could send 50 at most";
  EXPECT_EQ(arrivals.size(), 60u);
  std::vector<double> after;
  for (double t : arrivals) {
    if (t >= changed_at) after.push_back(t);
  }
  EXPECT_LE(max_in_window(after, 1.0), 1 + 40 + 1);
}

}  // namespace
}  // namespace surge::testing
