// What an operator sees of each partner host on /metrics (engine/observe/origin_series), from
// the shard core on its simulated clock (core_simulation.hpp): the latencies its adaptive limit
// judges it by, the limit and need that follow, and the subscribers it holds back.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "engine/observe/metrics_text.hpp"
#include "engine/shard/core.hpp"
#include "tests/engine/shard/core_simulation.hpp"

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using testing::answer;
using testing::queue_row;
using testing::received;
using testing::simulation;

// The value of one series in a text exposition, none when it is absent.
std::optional<double> sample(const std::string& text, const std::string& series) {
  const auto at = text.find("\n" + series + " ");
  if (at == std::string::npos) return std::nullopt;
  return std::stod(text.substr(at + series.size() + 2));
}

std::string of(const char* name, const char* origin) {
  return std::string(name) + "{origin=\"" + origin + "\"}";
}

// Ten subscribers at 10/s on a host answering in 200 ms, ten on one answering in 50 ms and
// 500 ms by turns: the first is judged by its best answer, the second by its usual latency.
TEST(ShardCoreOriginSeries, EachHostShowsTheLatenciesItsLimitIsJudgedBy) {
  simulation sim(simulation::default_config());
  bool slow = false;
  sim.partner = [&](const received& r) {
    if (r.subscriber <= 10) return answer{.latency = 200ms};
    slow = !slow;
    return answer{.latency = slow ? 500ms : 50ms};
  };
  std::vector<storage::subscriber_row> rows;
  for (std::int64_t id = 1; id <= 20; ++id) {
    auto row = simulation::subscriber(id, 10, 10);
    row.url = std::string(id <= 10 ? "http://steady.test" : "http://varied.test:8080") + "/hook/" +
              std::to_string(id);
    rows.push_back(std::move(row));
  }
  sim.load(std::move(rows));
  for (std::int64_t id = 1; id <= 20; ++id) {
    for (int i = 0; i < 60; ++i) sim.enqueue(id);
  }
  sim.run_for(3500ms);
  const auto text = metrics_text(sim.metrics(), 10);
  const char* steady_host = "http://steady.test:80";
  const char* varied_host = "http://varied.test:8080";

  EXPECT_EQ(sample(text, of("surge_origin_subscribers", steady_host)), 10) << text;
  EXPECT_EQ(sample(text, of("surge_origin_rate_limit", varied_host)), 100);
  const auto steady_best = sample(text, of("surge_origin_best_latency_seconds", steady_host));
  ASSERT_TRUE(steady_best);
  EXPECT_NEAR(*steady_best, 0.2, 0.005);
  EXPECT_EQ(sample(text, of("surge_origin_judged_by_usual", steady_host)), 0);
  // Judged by its best: 2 x 200 ms + 2 ms; its need, 100/s x 0.402 s + 4.
  const auto steady_acceptable =
      sample(text, of("surge_origin_acceptable_latency_seconds", steady_host));
  const auto steady_need = sample(text, of("surge_origin_in_flight_need", steady_host));
  ASSERT_TRUE(steady_acceptable && steady_need) << text;
  EXPECT_NEAR(*steady_acceptable, 0.402, 0.01);
  EXPECT_NEAR(*steady_need, 45, 1);
  EXPECT_GE(sample(text, of("surge_origin_in_flight_requests", steady_host)), 1);

  const auto varied_best = sample(text, of("surge_origin_best_latency_seconds", varied_host));
  ASSERT_TRUE(varied_best) << text;
  EXPECT_NEAR(*varied_best, 0.05, 0.005);
  EXPECT_EQ(sample(text, of("surge_origin_judged_by_usual", varied_host)), 1);
  const auto usual = sample(text, of("surge_origin_usual_latency_seconds", varied_host));
  ASSERT_TRUE(usual);
  EXPECT_GT(*usual, 0.275) << "the mean of 50 and 500 ms, plus its uncertainty";
  EXPECT_LT(*usual, 0.5);
  EXPECT_NEAR(*sample(text, of("surge_origin_acceptable_latency_seconds", varied_host)), 2 * *usual,
              0.001);
  EXPECT_GE(sample(text, of("surge_origin_in_flight_limit", varied_host)), 4);
}

// A hundred unthrottled subscribers on one host 200 ms away: its limit starts at 4 and grows
// per round trip, so in the first second most of them wait for it, and the operator sees them
// waiting there rather than at the shard.
TEST(ShardCoreOriginSeries, SubscribersHeldBackByTheirHostAreCountedThere) {
  simulation sim(simulation::default_config());
  sim.partner = [](const received&) { return answer{.latency = 200ms}; };
  std::vector<storage::subscriber_row> rows;
  for (std::int64_t id = 1; id <= 100; ++id) rows.push_back(simulation::subscriber(id, 1e6, 1e6));
  sim.load(std::move(rows));
  for (std::int64_t id = 1; id <= 100; ++id) {
    for (int i = 0; i < 50; ++i) sim.enqueue(id);
  }
  sim.run_for(1100ms);
  const auto text = metrics_text(sim.metrics(), 10);
  const char* host = "http://partner.test:80";
  const auto limit = sample(text, of("surge_origin_in_flight_limit", host));
  const auto in_flight = sample(text, of("surge_origin_in_flight_requests", host));
  ASSERT_TRUE(limit && in_flight) << text;
  EXPECT_LE(*in_flight, *limit + 1);
  EXPECT_GT(sample(text, "surge_origin_waiting_subscribers{origin=\"" + std::string(host) +
                             "\",for=\"origin\"}"),
            0)
      << text;
  EXPECT_GT(sample(text, of("surge_origin_in_flight_need", host)), *limit)
      << "the limit, not the need, holds them";

  // Once every row is done, nobody waits for the host and nothing is in flight to it.
  ASSERT_TRUE(sim.run_until([&] { return sim.all_rows(queue_row::state::done); }, 60s));
  sim.run_for(1100ms);
  const auto after = metrics_text(sim.metrics(), 10);
  EXPECT_EQ(sample(after, "surge_origin_waiting_subscribers{origin=\"" + std::string(host) +
                              "\",for=\"origin\"}"),
            0)
      << after;
  EXPECT_EQ(sample(after, of("surge_origin_in_flight_requests", host)), 0);
}

// A subscriber whose partner answers 410 Gone is deactivated: its host counts it no more, in
// its subscribers or in the rate its need is sized by.
TEST(ShardCoreOriginSeries, ADeactivatedSubscriberLeavesItsHostsCountAndRate) {
  simulation sim(simulation::default_config());
  sim.partner = [](const received& r) {
    return answer{.status = r.subscriber == 2 ? 410 : 200, .latency = 100ms};
  };
  sim.load({simulation::subscriber(1, 10, 10), simulation::subscriber(2, 30, 10)});
  for (int i = 0; i < 20; ++i) sim.enqueue(1);
  sim.enqueue(2);
  sim.run_for(1100ms);
  const auto text = metrics_text(sim.metrics(), 10);
  const char* host = "http://partner.test:80";
  EXPECT_EQ(sample(text, of("surge_origin_subscribers", host)), 1) << text;
  EXPECT_EQ(sample(text, of("surge_origin_rate_limit", host)), 10);
}

}  // namespace
}  // namespace surge::engine
