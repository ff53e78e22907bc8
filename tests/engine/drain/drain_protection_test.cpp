// Protecting partners: a dead endpoint gets one probe per cool-down instead of a request per
// row, and its rows are not claimed meanwhile; recovery resumes full delivery.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include <SQLiteCpp/Statement.h>

#include "tests/support/e2e.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;

std::int64_t untouched_rows(test_queue& queue) {
  SQLite::Statement query(queue.db(),
                          "SELECT COUNT(*) FROM webhook_delivery WHERE attempts = 0 AND "
                          "status = 'pending' AND locked_until = 0");
  query.executeStep();
  return query.getColumn(0).getInt64();
}

TEST(DrainProtection, ADeadEndpointGetsOnlyProbesAndItsRowsAreNotClaimed) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path(), {.behaviours_json = R"({"1": {"status": 500}})"});
  const auto id = queue.add_subscriber("http://placeholder/", 1000, 100);
  queue.db().exec("UPDATE webhook_subscriber SET url = '" + sink.url_for(id) +
                  "', max_in_flight = 4 WHERE id = " + std::to_string(id));
  const auto rows = queue.add_rows(id, 3000);

  const auto result = run_surge(dir, {"drain", "--db", queue.path(), "--allow-private-targets",
                                      "--duration", "10", "--progress-interval", "0"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("circuit open"), std::string::npos) << result.err;

  auto requests = sink.stop_and_read();
  std::sort(requests.begin(), requests.end(),
            [](const auto& a, const auto& b) { return a.arrival < b.arrival; });
  ASSERT_FALSE(requests.empty());
  // Ten failures open the circuit (plus what was already in flight), then probes after
  // 1, 2 and 4 s of cool-down: a handful in ten seconds, not a request per row.
  EXPECT_LE(requests.size(), 10u + 4u + 4u) << "requests to a dead endpoint";
  const double opened = requests.front().arrival + 0.5;
  const auto later = std::count_if(requests.begin(), requests.end(),
                                   [&](const auto& r) { return r.arrival > opened; });
  EXPECT_GE(later, 2) << "no probes: the circuit never tried again";
  EXPECT_LE(later, 4);
  // Rows were not claimed and pushed through the retry machinery meanwhile.
  EXPECT_GE(untouched_rows(queue), static_cast<std::int64_t>(rows.size()) - 50);
}

TEST(DrainProtection, AnEndpointThatComesBackGetsEverything) {
  temp_dir dir;
  test_queue queue(dir);
  const auto port = unused_port();
  const auto id =
      queue.add_subscriber("http://127.0.0.1:" + std::to_string(port) + "/hook/1", 300, 30);
  const auto rows = queue.add_rows(id, 400);

  tools::child_process drain(surge_binary(),
                             {"drain", "--db", queue.path(), "--allow-private-targets",
                              "--until-drained", "--progress-interval", "0", "--retry-base", "0.2"},
                             dir.file("drain.out"), dir.file("drain.err"));
  // Connection refused for a while: the circuit opens; then the endpoint starts.
  std::this_thread::sleep_for(2500ms);
  sink_process sink(dir, queue.path(), {.port = port});
  ASSERT_EQ(drain.wait(60s).value_or(-1), 0);

  const auto delivered = deliveries(sink.stop_and_read());
  EXPECT_EQ(delivered.size(), rows.size());
  EXPECT_EQ(queue.count_by_status()["done"], static_cast<std::int64_t>(rows.size()));
}

}  // namespace
}  // namespace surge::testing

namespace surge::testing {
namespace {

// A receiver that accepts 20 requests a second from a subscriber configured for 100, and answers
// the rest 429 with "Retry-After: 0" (so pausing does not help): pushback must bring the
// effective rate down to about what it accepts, rather than sending at the configured rate into
// a wall of 429s.
TEST(DrainProtection, PushbackBringsTheRateDownToWhatTheReceiverAccepts) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path(),
                    {.behaviours_json = R"({"1": {"accept_rate": 20, "retry_after": "0"}})"});
  const auto id = queue.add_subscriber_at(sink, 100, 10);
  queue.add_rows(id, 2000);
  const auto result = run_surge(dir, {"drain", "--db", queue.path(), "--allow-private-targets",
                                      "--duration", "14", "--progress-interval", "0"});
  ASSERT_EQ(result.exit_code, 0) << result.err;

  auto requests = sink.stop_and_read();
  std::sort(requests.begin(), requests.end(),
            [](const auto& a, const auto& b) { return a.arrival < b.arrival; });
  ASSERT_FALSE(requests.empty());
  // After a few seconds to adapt: the second half of the run.
  const double from = requests.front().arrival + 7.0;
  int accepted = 0, refused = 0;
  for (const auto& r : requests) {
    if (r.arrival < from) continue;
    (r.status == 429 ? refused : accepted) += 1;
  }
  std::cerr << "second half: " << accepted << " accepted, " << refused << " refused\n";
  const double span = requests.back().arrival - from;
  ASSERT_GT(span, 3.0);
  EXPECT_LE(refused, accepted / 5) << "still pushing far above what the receiver accepts";
  EXPECT_GE(accepted / span, 0.5 * 20) << "backed off far below what the receiver accepts";
}

}  // namespace
}  // namespace surge::testing
