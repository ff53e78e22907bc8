// Rate conformance measured at the receiver (DESIGN section 3): in every window of length T a
// subscriber gets at most burst + rate * T + 1 requests, and while backlogged at least 95 % of
// its rate. Also: a huge backlog of one subscriber does not hold back another.
#include <gtest/gtest.h>

#include <algorithm>

#include <SQLiteCpp/Statement.h>

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

// When Surge started each attempt, from its audit table: the send side of the same property,
// free of the transport's latency spread (a first burst on new connections arrives late and
// bunched against the steady stream, which slow sanitizer builds make visible at the receiver).
std::vector<double> attempt_starts(test_queue& queue, std::int64_t id) {
  std::vector<double> out;
  SQLite::Statement query(queue.db(),
                          "SELECT started_at FROM surge_attempt WHERE subscriber_id = ? "
                          "ORDER BY started_at");
  query.bind(1, id);
  while (query.executeStep()) out.push_back(query.getColumn(0).getDouble());
  return out;
}

void expect_conformance(const std::vector<double>& arrivals, const limit_case& limit,
                        const std::string& label) {
  ASSERT_FALSE(arrivals.empty()) << label;
  for (double window : {0.1, 0.25, 0.5, 1.0, 2.0, 3.0}) {
    const double bound = limit.burst + limit.rate * window + 1;
    EXPECT_LE(max_in_window(arrivals, window), bound) << label << " window " << window << " s";
  }
  // Backlogged from the first request to the last: after the initial burst, the rate.
  const double span = arrivals.back() - arrivals.front();
  ASSERT_GT(span, 0) << label;
  const double achieved = (static_cast<double>(arrivals.size()) - limit.burst) / span;
  EXPECT_GE(achieved, 0.95 * limit.rate) << label << " achieved " << achieved << "/s";
}

TEST(DrainRate, EverySubscriberStaysWithinItsLimitAndNearItWhileBacklogged) {
  temp_dir dir;
  test_queue queue(dir);
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
    expect_conformance(arrivals, cases[i], "subscriber " + std::to_string(ids[i]));
    expect_conformance(attempt_starts(queue, ids[i]), cases[i],
                       "subscriber " + std::to_string(ids[i]) + " (send times)");
  }
}

TEST(DrainRate, AHugeBacklogDoesNotHoldBackAnotherSubscriber) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path(), {.threads = 2});
  const auto big = queue.add_subscriber_at(sink, 1500, 100);
  const auto small = queue.add_subscriber_at(sink, 40, 10);
  // The big backlog is older, so a global "oldest first" claim would serve it first.
  queue.add_rows(big, 100'000);
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
