// Failure handling end to end: backoff, Retry-After in both forms, the attempt and age limits,
// and 410 Gone.
#include <gtest/gtest.h>

#include <algorithm>
#include <ctime>
#include <functional>
#include <memory>

#include <SQLiteCpp/Statement.h>

#include "proto/clock.hpp"
#include "storage/sqlite/database.hpp"
#include "tests/support/backends.hpp"
#include "tests/support/e2e.hpp"

namespace surge::testing {
namespace {

struct retry_env {
  temp_dir dir;
  std::unique_ptr<test_queue> queue_held;
  test_queue& queue;
  std::optional<sink_process> sink;

  // `queue`: made in `dir` when not given (a SQLite file).
  explicit retry_env(const std::string& behaviours,
                     std::function<std::unique_ptr<test_queue>(const temp_dir&)> make = {})
      : queue_held(make ? make(dir) : std::make_unique<test_queue>(dir)), queue(*queue_held) {
    sink.emplace(dir, queue.path(), sink_process::options{.behaviours_json = behaviours});
  }
  std::int64_t subscriber(double rate = 100, int burst = 10, int max_in_flight = 0) {
    const auto id = queue.add_subscriber("http://placeholder/", rate, burst);
    queue.sql().exec("UPDATE webhook_subscriber SET url = ?, max_in_flight = ? WHERE id = ?",
                     {sink->url_for(id), std::to_string(max_in_flight), std::to_string(id)});
    return id;
  }
  run_result drain(std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"drain",
                                  "--db",
                                  queue.path(),
                                  "--until-drained",
                                  "--until-drained-wait",
                                  "10",
                                  "--allow-private-targets",
                                  "--progress-interval",
                                  "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_surge(dir, args);
  }
};

std::vector<sink_request> of_delivery(const std::vector<sink_request>& all, std::int64_t id) {
  std::vector<sink_request> out;
  for (const auto& r : all) {
    if (r.delivery_id == id) out.push_back(r);
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.arrival < b.arrival; });
  return out;
}

// On both kinds of queue: retries, their backoff and Retry-After are written through each one's
// outcome statements.
class DrainRetryOn : public ::testing::TestWithParam<backend> {
 protected:
  // A maker for retry_env's queue: empty for a SQLite file, and empty with skip_reason_ set when
  // the PostgreSQL server binaries are missing.
  std::function<std::unique_ptr<test_queue>(const temp_dir&)> queue_maker() {
    if (GetParam() == backend::sqlite) return {};
    std::string why_not;
    auto* server = postgres_server::shared(&why_not);
    if (server == nullptr) {
      skip_reason_ = why_not;
      return {};
    }
    return
        [server](const temp_dir& dir) { return make_test_queue(backend::postgres, dir, server); };
  }
  std::string skip_reason_;
};

TEST_P(DrainRetryOn, FailuresAreRetriedWithBackoffThatIsNeverEarly) {
  auto make = queue_maker();
  if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
  retry_env env(R"({"1": {"fail_first": 2, "status": 500}})", make);
  const auto id = env.subscriber();
  const auto rows = env.queue.add_rows(id, 3);
  const auto result = env.drain({"--retry-base", "0.4"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto requests = env.sink->stop_and_read();
  for (auto row : rows) {
    const auto tries = of_delivery(requests, row);
    ASSERT_EQ(tries.size(), 3u) << "delivery " << row;
    EXPECT_EQ(tries[0].attempt, 1);
    EXPECT_EQ(tries[1].attempt, 2);
    EXPECT_EQ(tries[2].attempt, 3);
    // Equal jitter: at least half the nominal delay (0.4 s, then 0.8 s).
    EXPECT_GE(tries[1].arrival - tries[0].arrival, 0.2);
    EXPECT_GE(tries[2].arrival - tries[1].arrival, 0.4);
    const auto state = env.queue.row(row);
    EXPECT_EQ(state.status, "done");
    EXPECT_EQ(state.attempts, 3);
  }
}

TEST_P(DrainRetryOn, TooManyRequestsWithRetryAfterSecondsPausesTheSubscriberAndCostsNoAttempt) {
  auto make = queue_maker();
  if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
  retry_env env(R"({"1": {"fail_first": 1, "status": 429, "retry_after": "2"}})", make);
  // One request at a time, so that the pause is visible across rows.
  const auto id = env.subscriber(100, 10, 1);
  const auto rows = env.queue.add_rows(id, 3);
  const auto result = env.drain();
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto requests = env.sink->stop_and_read();
  ASSERT_FALSE(requests.empty());
  const auto first = std::min_element(requests.begin(), requests.end(),
                                      [](auto& a, auto& b) { return a.arrival < b.arrival; });
  ASSERT_EQ(first->status, 429);
  for (const auto& request : requests) {
    if (&request == &*first) continue;
    EXPECT_GE(request.arrival - first->arrival, 1.95)
        << "request during the Retry-After pause: delivery " << request.delivery_id;
  }
  const auto retried = of_delivery(requests, first->delivery_id);
  ASSERT_EQ(retried.size(), 2u);
  EXPECT_EQ(retried[1].attempt, 1) << "a 429 must not use up an attempt";
  EXPECT_EQ(env.queue.row(first->delivery_id).attempts, 1);
  for (auto row : rows) EXPECT_EQ(env.queue.row(row).status, "done");
}

std::string http_date(std::time_t when) {
  std::tm utc{};
  gmtime_r(&when, &utc);
  char text[64];
  std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &utc);
  return text;
}

INSTANTIATE_TEST_SUITE_P(Backends, DrainRetryOn, all_backends(), backend_name);

// A partner that asks for ten minutes (Retry-After: 600) cannot be sent to within the drain's
// wait: --until-drained ends once every other row is done, names the paused subscriber and exits
// 5, so a cron job tells "drained" from "drained except held" and is not kept alive by it.
TEST(DrainRetry, ALongPauseEndsAnUntilDrainedRunWithTheSubscriberNamedAndExitFive) {
  retry_env env(R"({"1": {"status": 429, "retry_after": "600"}})");
  const auto paused = env.subscriber(100, 10, 1);
  const auto healthy = env.subscriber(100, 10);
  env.queue.add_rows(paused, 20);
  const auto rows = env.queue.add_rows(healthy, 50);
  // The pause (600 s) outlasts --until-drained-wait (10 s): the drain does not wait for it.
  const auto result = env.drain();
  EXPECT_EQ(result.exit_code, 5) << result.err;
  const std::string line =
      "held: subscriber " + std::to_string(paused) + ": subscriber paused by Retry-After (until ";
  EXPECT_NE(result.out.find(line), std::string::npos) << result.out;
  EXPECT_NE(result.err.find("drained except"), std::string::npos) << result.err;
  for (const auto row : rows) EXPECT_EQ(env.queue.row(row).status, "done");
  const auto requests = env.sink->stop_and_read();
  EXPECT_EQ(std::count_if(requests.begin(), requests.end(),
                          [&](const auto& r) { return r.subscriber_id == paused; }),
            1)
      << "the paused partner was asked once";
}

TEST(DrainRetry, ServiceUnavailableWithAnHttpDateIsHonoured) {
  const auto until = static_cast<std::time_t>(proto::unix_now()) + 4;
  retry_env env(R"({"1": {"fail_first": 1, "status": 503, "retry_after": ")" + http_date(until) +
                R"("}})");
  const auto id = env.subscriber();
  const auto rows = env.queue.add_rows(id, 1);
  const auto result = env.drain();
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto tries = of_delivery(env.sink->stop_and_read(), rows.front());
  ASSERT_EQ(tries.size(), 2u);
  EXPECT_EQ(tries[0].status, 503);
  EXPECT_GE(tries[1].arrival, static_cast<double>(until) - 0.05);
  EXPECT_EQ(env.queue.row(rows.front()).attempts, 2);  // a 503 does count
}

TEST(DrainRetry, AttemptLimitDeadLetters) {
  retry_env env(R"({"1": {"status": 500}})");
  const auto id = env.subscriber();
  const auto rows = env.queue.add_rows(id, 2);
  const auto result = env.drain({"--max-attempts", "3", "--retry-base", "0.1"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto requests = env.sink->stop_and_read();
  for (auto row : rows) {
    EXPECT_EQ(of_delivery(requests, row).size(), 3u);
    const auto state = env.queue.row(row);
    EXPECT_EQ(state.status, "dead");
    EXPECT_EQ(state.attempts, 3);
    EXPECT_EQ(state.last_status.value_or(0), 500);
    EXPECT_NE(state.last_error.find("attempt limit"), std::string::npos) << state.last_error;
  }
}

TEST(DrainRetry, RetryWindowDeadLettersOldRows) {
  retry_env env(R"({"1": {"status": 502}})");
  const auto id = env.subscriber();
  const auto old_rows = env.queue.add_rows(id, 2, R"({"old":true})", proto::unix_now() - 2000);
  const auto result = env.drain({"--max-age", "1000"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto requests = env.sink->stop_and_read();
  for (auto row : old_rows) {
    EXPECT_EQ(of_delivery(requests, row).size(), 1u);
    const auto state = env.queue.row(row);
    EXPECT_EQ(state.status, "dead");
    EXPECT_NE(state.last_error.find("retry window"), std::string::npos) << state.last_error;
  }
}

TEST(DrainRetry, GoneDeadLettersAndDeactivatesTheSubscriber) {
  retry_env env(R"({"1": {"status": 410}})");
  const auto id = env.subscriber(100, 10, 1);
  const auto rows = env.queue.add_rows(id, 4);
  const auto result = env.drain();
  ASSERT_EQ(result.exit_code, 5) << "drained except the deactivated subscriber's rows: "
                                 << result.err;
  const auto requests = env.sink->stop_and_read();
  ASSERT_EQ(requests.size(), 1u) << "rows after a 410 must not be sent";
  // Only the row that got the 410 is dead; the others wait, unleased, for the subscriber to be
  // enabled again.
  for (auto row : rows) {
    const auto state = env.queue.row(row);
    if (row == requests[0].delivery_id) {
      EXPECT_EQ(state.status, "dead");
      EXPECT_NE(state.last_error.find("410"), std::string::npos) << state.last_error;
    } else {
      EXPECT_EQ(state.status, "pending") << "row " << row << ": " << state.last_error;
      EXPECT_EQ(state.attempts, 0);
      EXPECT_EQ(state.locked_until, 0);
    }
  }
  SQLite::Statement active(env.queue.db(), "SELECT active FROM webhook_subscriber WHERE id = ?");
  active.bind(1, id);
  ASSERT_TRUE(active.executeStep());
  EXPECT_EQ(active.getColumn(0).getInt(), 0);
}

}  // namespace
}  // namespace surge::testing
