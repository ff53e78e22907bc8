// Every drainer of a subscriber spends from its one persisted bucket: two
// `surge drain` processes on one file, or Surge beside the steady-state drainer, keep the
// partner's limit together, as the receiver counts it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/e2e.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;

constexpr double rate = 10;
constexpr int burst = 10;

std::vector<double> arrivals_of(const std::vector<sink_request>& requests) {
  std::vector<double> out;
  for (const auto& r : requests) out.push_back(r.arrival);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> drain_args(const test_queue& queue, const std::string& seconds) {
  return {"drain",      "--db",  queue.path(),          "--allow-private-targets",
          "--duration", seconds, "--progress-interval", "0"};
}

// At most burst + rate x T in every window T, plus one for clock granularity: a drain that has
// seen another drainer's writes in the bucket holds no tokens while the other spends.
void expect_within_limit(const std::vector<double>& sends) {
  for (const double window : {1.0, 2.0, 4.0}) {
    std::printf("at most %d requests in a window of %.0f s (limit %.0f), %zu in all\n",
                max_in_window(sends, window), window, burst + rate * window, sends.size());
    EXPECT_LE(max_in_window(sends, window), burst + rate * window + 1)
        << "window " << window << " s, " << sends.size() << " requests in all";
  }
}

// One backlogged subscriber at `rate` and `burst`, pointed at a sink.
class DrainSharedBucket : public ::testing::Test {
 protected:
  void SetUp() override { queue.add_rows(id, 400); }
  temp_dir dir;
  test_queue queue{dir};
  sink_process sink{dir, queue.path()};
  std::int64_t id = queue.add_subscriber_at(sink, rate, burst);
};

// Started together, the first drain to renew owns the subscriber and the even share then moves
// it to the other about a second later (ownership leases): both spend from its bucket, and the
// handoff grants no second burst.
TEST_F(DrainSharedBucket, TwoDrainsOnOneSubscriberKeepItsLimitTogether) {
  tools::child_process first(surge_binary(), drain_args(queue, "4"), dir.file("a.out"),
                             dir.file("a.err"));
  tools::child_process second(surge_binary(), drain_args(queue, "4"), dir.file("b.out"),
                              dir.file("b.err"));
  ASSERT_EQ(first.wait(60s).value_or(-1), 0);
  ASSERT_EQ(second.wait(60s).value_or(-1), 0);
  const auto sends = arrivals_of(sink.stop_and_read());
  // Each process alone would send about burst + 4 x rate = 50; before the shared bucket the two
  // together sent 80 in 4 s.
  expect_within_limit(sends);
  // That a backlogged subscriber keeps its rate through leases is proved on a simulated clock
  // (TokenAllowance.ABackloggedSubscriberKeepsItsRateThroughLeasesAndStaysWithinItsLimit); here
  // a loaded machine could only make the two slower, never break the limit.
  EXPECT_FALSE(sends.empty());
  // Leases given back at exit: the persisted bucket is not left with tokens nobody spent beyond
  // its capacity, and both processes ran without errors.
  EXPECT_LE(
      queue.db()
          .execAndGet("SELECT tokens FROM webhook_subscriber WHERE id = " + std::to_string(id))
          .getDouble(),
      burst);
}

TEST_F(DrainSharedBucket, SurgeBesideTheSteadyStateDrainerKeepsTheLimitTogether) {
  // The steady-state drainer's own statements: it claims small batches and spends one token of
  // the persisted bucket per row in its DEFERRED transaction, waiting when there is none.
  const std::string sent_log = dir.file("other.sent");
  tools::child_process other(
      SURGE_OTHER_DRAINER_PATH,
      {"--db", queue.path(), "--batch", "5", "--paced", "--sent", sent_log, "--sleep-ms", "20"},
      dir.file("other.out"), dir.file("other.err"));
  const auto result = run_surge(dir, drain_args(queue, "4"));
  other.stop(5s);
  ASSERT_EQ(result.exit_code, 0) << result.err;

  const auto surge_sends = arrivals_of(sink.stop_and_read());
  std::vector<double> other_sends;
  std::ifstream in(sent_log);
  for (double subscriber = 0, at = 0; in >> subscriber >> at;) other_sends.push_back(at);
  std::printf("surge sent %zu, the steady-state drainer %zu\n", surge_sends.size(),
              other_sends.size());
  ASSERT_FALSE(surge_sends.empty());
  ASSERT_FALSE(other_sends.empty()) << "the steady-state drainer sent nothing: no overlap";
  // Judged over everything either sent, before, while and after the other ran.
  std::vector<double> together = surge_sends;
  together.insert(together.end(), other_sends.begin(), other_sends.end());
  std::sort(together.begin(), together.end());
  expect_within_limit(together);
}

}  // namespace
}  // namespace surge::testing
