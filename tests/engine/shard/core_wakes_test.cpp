// When the shard's core asks to be woken: paced partners' tokens on the wake grid, on the
// simulated clock.
#include <chrono>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "tests/engine/shard/core_simulation.hpp"

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using testing::answer;
using testing::most_in_window;
using testing::received;
using testing::simulation;
using steady = std::chrono::steady_clock;

struct paced_run {
  int timer_wakes = 0;                      // over the measured span
  std::vector<std::vector<received>> sent;  // each subscriber's requests in the measured span
};

// 100 subscribers at 10 to 11 requests/s, burst 2, each with a backlog: their tokens come due
// at scattered moments, about 1,050 times a second. Measured from 1 s to 2 s, after the bursts.
constexpr int subscribers = 100;

paced_run run_paced_partners(std::chrono::microseconds wake_grid) {
  drain_config config = simulation::default_config();
  config.scheduler.wake_grid = wake_grid;
  simulation sim(config);
  sim.partner = [](const received&) { return answer{.latency = 50ms}; };
  std::vector<storage::subscriber_row> rows;
  for (int id = 1; id <= subscribers; ++id) {
    rows.push_back(simulation::subscriber(id, 10.0 + id * 0.01, 2));
  }
  sim.load(rows);
  for (int id = 1; id <= subscribers; ++id) {
    for (int i = 0; i < 25; ++i) sim.enqueue(id);
  }
  const auto start = sim.now();
  sim.run_until(start + 1s);
  const int wakes_before = sim.timer_wakes;
  sim.run_until(start + 2s);
  paced_run run;
  run.timer_wakes = sim.timer_wakes - wakes_before;
  for (int id = 1; id <= subscribers; ++id) {
    std::vector<received> measured;
    for (const auto& request : sim.requests_of(id)) {
      if (request.at >= start + 1s && request.at < start + 2s) measured.push_back(request);
    }
    run.sent.push_back(std::move(measured));
  }
  return run;
}

// Each wake costs the reactor two timer re-arms and a context switch: the shard wakes for
// scattered tokens once per millisecond at most, and each subscriber still sends at its rate,
// never above its limit (a token used late is not lost while its bucket keeps filling).
TEST(ShardCoreWakes, PacedPartnersTokensAreWokenForOnTheGridAndEachKeepsItsRate) {
  const paced_run exact = run_paced_partners(0us);
  const paced_run on_grid = run_paced_partners(1000us);
  // Woken exactly, the core looks at each subscriber once per token (its pump; its write then
  // passes the wire gate at once) and at its own rounds: about 1,250 wakes in the second.
  EXPECT_GT(exact.timer_wakes, 1'100) << "the workload's tokens come due at scattered moments";
  EXPECT_LE(on_grid.timer_wakes, 1'000) << "at most once a millisecond";
  for (std::size_t i = 0; i < on_grid.sent.size(); ++i) {
    const double rate = 10.0 + static_cast<double>(i + 1) * 0.01;
    SCOPED_TRACE("subscriber " + std::to_string(i + 1));
    EXPECT_GE(on_grid.sent[i].size() + 1, exact.sent[i].size()) << "no rate lost";
    EXPECT_GE(static_cast<double>(on_grid.sent[i].size()), rate - 1);
    EXPECT_LE(most_in_window(on_grid.sent[i], 1s), static_cast<int>(rate) + 2) << "rate + burst";
  }
}

// One fast subscriber with a backlog, answered in 1 ms: its requests in the first 500 ms.
std::vector<received> fast_subscriber_for_half_a_second(double rate, std::int64_t burst) {
  simulation sim;
  sim.partner = [](const received&) { return answer{.latency = 1ms}; };
  auto row = simulation::subscriber(1, rate, burst);
  row.max_in_flight = 100;
  sim.load({row});
  for (int i = 0; i < static_cast<int>(rate * 0.6); ++i) sim.enqueue(1);
  const auto start = sim.now();
  sim.run_until(start + 500ms);
  return sim.requests_of(1);
}

// A subscriber at 5,000 requests/s with a burst of 2 gets five tokens a millisecond and holds
// two: woken on the grid it sent about 1,000/s here (the pump's wake, then the wire line's a
// step later). It is woken at each token, and keeps its rate.
TEST(ShardCoreWakes, AFastSubscriberWithASmallBurstIsWokenExactlyAndKeepsItsRate) {
  const auto sent = fast_subscriber_for_half_a_second(5000.0, 2);
  EXPECT_GE(sent.size(), 2'350u) << "95 % of its rate, less the first round trips";
  EXPECT_LE(most_in_window(sent, 100ms), 500 + 2);
}

// At the wire gate a write waits for its token and the margin's refill: 8,000/s with a burst of
// 10 needs 5.5 tokens there (a margin of 0.56 ms), so its burst holds 4.5 more, less than a
// millisecond's 8. Woken on the grid it sent 2,397 requests here; it is woken exactly, and keeps
// its rate.
TEST(ShardCoreWakes, AFastSubscriberWhoseGateHoldsTheMarginBackIsWokenExactly) {
  const auto sent = fast_subscriber_for_half_a_second(8000.0, 10);
  EXPECT_GE(sent.size(), 3'500u) << "most of its rate, less the first round trips";
  EXPECT_LE(most_in_window(sent, 100ms), 800 + 10);
}

}  // namespace
}  // namespace surge::engine
