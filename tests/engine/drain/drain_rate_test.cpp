// Rate conformance: in every window of length T Surge starts at most
// burst + rate * T + 1 attempts per subscriber, and the receiver sees the same with T stretched
// by the measured transit spread. Also: a huge backlog of one subscriber does not hold back
// another. That a backlogged subscriber keeps its rate is a rule of the buckets, proved on a
// simulated clock (tests/engine/limits/token_bucket_test.cpp, token_allowance_test.cpp): here a
// loaded machine could only make it slower, never break the limit.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <utility>

#include <SQLiteCpp/Statement.h>

#include "tests/support/backends.hpp"
#include "tests/support/e2e.hpp"

namespace surge::testing {
namespace {

struct limit_case {
  double rate;
  int burst;
  int rows;
};

std::vector<double> arrivals_of(const std::vector<sink_request>& requests, std::int64_t id) {
  std::vector<double> out;
  for (const auto& request : requests) {
    if (request.subscriber_id == id) out.push_back(request.arrival);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<double> sorted_values(const std::map<std::pair<std::int64_t, int>, double>& starts) {
  std::vector<double> out;
  for (const auto& entry : starts) out.push_back(entry.second);
  std::sort(out.begin(), out.end());
  return out;
}

// transit_spread, expecting every attempt Surge started to have arrived.
double checked_transit_spread(const std::vector<sink_request>& requests, std::int64_t id,
                              const std::map<std::pair<std::int64_t, int>, double>& starts) {
  const auto transit = transit_spread(requests, id, starts);
  EXPECT_EQ(transit.matched, starts.size()) << "every attempt Surge started should have arrived";
  return transit.spread;
}

void expect_conformance(const std::vector<double>& arrivals, const limit_case& limit,
                        const std::string& label, double transit_slack = 0) {
  ASSERT_FALSE(arrivals.empty()) << label;
  for (double window : {0.1, 0.25, 0.5, 1.0, 2.0, 3.0}) {
    const double bound = limit.burst + limit.rate * (window + transit_slack) + 1;
    EXPECT_LE(max_in_window(arrivals, window), bound) << label << " window " << window << " s";
  }
}

// On both kinds of queue: on PostgreSQL the tokens come from the persisted bucket through its
// own statements, and new rows are noticed through LISTEN/NOTIFY.
class DrainRateOn : public ::testing::TestWithParam<backend> {};

TEST_P(DrainRateOn, EverySubscriberStaysWithinItsLimitWhileBacklogged) {
  temp_dir dir;
  SURGE_QUEUE_FOR(GetParam(), dir, queue_held);
  test_queue& queue = *queue_held;
  sink_process sink(dir, queue.path());
  const std::vector<limit_case> cases = {
      {20.0, 5, 100},         // 4.75 s of backlog
      {50.0, 1, 200},         // 4 s, no burst to speak of
      {150.0 / 60.0, 3, 12},  // a per-minute limit: 150/min, 3.6 s
      {100.0, 20, 400},       // 3.8 s
  };
  std::vector<std::int64_t> ids;
  for (const auto& limit : cases) {
    const auto id = queue.add_subscriber_at(sink, limit.rate, limit.burst);
    queue.add_rows(id, limit.rows);
    ids.push_back(id);
  }
  const auto result = run_surge(dir, {"drain", "--db", queue.path(), "--until-drained",
                                      "--allow-private-targets", "--progress-interval", "0"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto requests = sink.stop_and_read();
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto arrivals = arrivals_of(requests, ids[i]);
    EXPECT_EQ(static_cast<int>(arrivals.size()), cases[i].rows);
    const auto starts = attempt_starts(queue, ids[i]);
    ASSERT_EQ(starts.size(), arrivals.size());
    const double spread = checked_transit_spread(requests, ids[i], starts);
    expect_conformance(arrivals, cases[i],
                       "subscriber " + std::to_string(ids[i]) + " (arrivals, transit spread " +
                           std::to_string(spread) + " s)",
                       spread);
    expect_conformance(sorted_values(starts), cases[i],
                       "subscriber " + std::to_string(ids[i]) + " (send times)");
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DrainRateOn, all_backends(), backend_name);

TEST(DrainRate, AHugeBacklogDoesNotHoldBackAnotherSubscriber) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path(), {.threads = 2});
  const auto big = queue.add_subscriber_at(sink, 1500, 100);
  const auto small = queue.add_subscriber_at(sink, 40, 10);
  // The big backlog is older, so a global "oldest first" claim would serve it first: more than
  // three times what its rate lets out in the run.
  queue.add_rows(big, 20'000);
  const auto small_rows = queue.add_rows(small, 60);

  const auto result = run_surge(dir, {"drain", "--db", queue.path(), "--duration", "4",
                                      "--allow-private-targets", "--progress-interval", "0"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto requests = sink.stop_and_read();
  const auto small_arrivals = arrivals_of(requests, small);
  ASSERT_EQ(small_arrivals.size(), small_rows.size()) << "the small subscriber was starved";
  expect_conformance(small_arrivals, {40.0, 10, 60}, "small subscriber");
  // The big one was served at the same time, not instead.
  const auto big_arrivals = arrivals_of(requests, big);
  ASSERT_FALSE(big_arrivals.empty());
  EXPECT_LT(big_arrivals.front(), small_arrivals.back());
  // Stopping by --duration gives every unsent lease back.
  SQLite::Statement leased(queue.db(),
                           "SELECT COUNT(*) FROM webhook_delivery WHERE locked_until > 0 "
                           "AND status IN ('pending', 'retry')");
  ASSERT_TRUE(leased.executeStep());
  EXPECT_EQ(leased.getColumn(0).getInt64(), 0);
}

}  // namespace
}  // namespace surge::testing
