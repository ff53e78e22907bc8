// Failure handling through the real binary: a long Retry-After pause ends an --until-drained run
// with exit 5 and the subscriber named. Backoff, Retry-After, the attempt limit, the retry window
// and 410 Gone are rules of the shard core and of proto/outcome, proved on a simulated clock
// (tests/engine/shard/core_test.cpp, tests/proto/outcome_test.cpp); the flags' fields in
// tests/tools/drain_options_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/support/e2e.hpp"

namespace surge::testing {
namespace {

struct retry_env {
  temp_dir dir;
  test_queue queue{dir};
  std::optional<sink_process> sink;

  explicit retry_env(const std::string& behaviours) {
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

}  // namespace
}  // namespace surge::testing
