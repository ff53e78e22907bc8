// The shard's payload memory (--max-payload-memory) on a simulated clock: rows are counted at
// their own subscriber's weight, and partners whose requests hang cannot hold the whole share
// while a neighbour waits for its rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "engine/shard/core.hpp"
#include "tests/engine/shard/core_simulation.hpp"

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using testing::answer;
using testing::received;
using testing::simulation;

constexpr std::int64_t healthy = 100;

// Thirty partners that never answer, each sent 64 KiB payloads, beside one healthy partner at
// 100/s whose rows are a few bytes: the share (2 MiB) is far less than what the thirty would take.
simulation hanging_partners_beside_a_healthy_one() {
  auto config = simulation::default_config();
  config.scheduler.max_payload_memory = 2 * 1024 * 1024;
  config.http.attempt_timeout = 20s;  // beyond the tests' 10 s, within the lease
  return simulation(config);
}

TEST(PayloadMemory, PartnersWhoseRequestsHangDoNotKeepANeighbourFromItsRows) {
  auto sim = hanging_partners_beside_a_healthy_one();
  std::vector<storage::subscriber_row> subscribers;
  for (std::int64_t id = 1; id <= 30; ++id)
    subscribers.push_back(simulation::subscriber(id, 1000, 100));
  auto neighbour = simulation::subscriber(healthy, 100, 10);
  neighbour.url = "http://healthy.test/hook";  // its own host: no origin limit is shared
  subscribers.push_back(neighbour);
  sim.load(subscribers);
  const std::string large(64 * 1024, 'x');
  for (std::int64_t id = 1; id <= 30; ++id) {
    for (int i = 0; i < 16; ++i) sim.enqueue(id, R"({"blob":")" + large + R"("})");
  }
  for (int i = 0; i < 2000; ++i) sim.enqueue(healthy, "{}");
  sim.partner = [](const received& request) {
    answer out;
    if (request.subscriber != healthy) out.latency = 1h;  // never read in this test
    return out;
  };
  sim.run_for(10s);
  const auto sent = sim.requests_of(healthy).size();
  // 10 s at 100/s after a burst of 10: about 1,010. Counted at the large rows' weight and
  // behind their hanging requests, it got a few dozen.
  EXPECT_GE(sent, 950u) << "the healthy partner waited behind the hanging ones' payloads";
  EXPECT_LE(sent, 1011u) << "never above its own rate";
}

TEST(PayloadMemory, TheShareStillBoundsWhatLargeRowsHold) {
  auto sim = hanging_partners_beside_a_healthy_one();
  std::vector<storage::subscriber_row> subscribers;
  for (std::int64_t id = 1; id <= 30; ++id)
    subscribers.push_back(simulation::subscriber(id, 1000, 100));
  sim.load(subscribers);
  const std::string large(64 * 1024, 'x');
  for (std::int64_t id = 1; id <= 30; ++id) {
    for (int i = 0; i < 16; ++i) sim.enqueue(id, R"({"blob":")" + large + R"("})");
  }
  sim.partner = [](const received&) {
    answer out;
    out.latency = 1h;
    return out;
  };
  sim.run_for(5s);
  // 2 MiB of share plus at most the 64 KiB floor each, far less than the 30 MiB queued: each
  // request in flight is one row of about 64 KiB.
  std::size_t in_flight = 0;
  for (std::int64_t id = 1; id <= 30; ++id) in_flight += sim.requests_of(id).size();
  EXPECT_LE(in_flight * 64 * 1024, 2u * 1024 * 1024 + 30u * 64 * 1024 + 64 * 1024);
  EXPECT_GE(in_flight, 16u) << "the share holds at least 2 MiB of rows";
}

// Each of the drain's shards holds its part of --max-payload-memory, whatever --max-in-flight
// allows: as `surge drain --threads 2 --max-payload-memory 32 --max-in-flight 640` against a
// partner that hangs on rows of 900 KB, which held 1.7 GB before the bound.
TEST(PayloadMemory, EachOfTwoShardsHoldsItsHalfWhateverTheInFlightCapAllows) {
  auto config = simulation::default_config();
  config.scheduler.max_payload_memory = 32 * 1024 * 1024;
  config.scheduler.max_in_flight = 640;
  config.scheduler.per_subscriber_in_flight = 80;
  config.scheduler.origin.latency_tolerance = 0;  // only the memory bounds it
  config.http.attempt_timeout = 30s;
  simulation sim(config, 2);
  std::vector<storage::subscriber_row> subscribers;
  for (std::int64_t id = 1; id <= 8; ++id)
    subscribers.push_back(simulation::subscriber(id, 1000, 100));
  sim.load(subscribers);
  const std::string large(900 * 1024, 'x');
  for (std::int64_t id = 1; id <= 8; ++id) {
    for (int i = 0; i < 12; ++i) sim.enqueue(id, R"({"blob":")" + large + R"("})");
  }
  sim.partner = [](const received&) {
    answer out;
    out.latency = 1h;
    return out;
  };
  std::size_t most_held = 0;
  for (int step = 0; step < 50; ++step) {
    sim.run_for(100ms);
    std::size_t in_flight = 0;
    for (std::int64_t id = 1; id <= 8; ++id) in_flight += sim.requests_of(id).size();
    most_held = std::max(most_held, in_flight + static_cast<std::size_t>(sim.core().buffered()));
  }
  // 16 MiB / 900 KB is 18 rows; one claim's estimate may overshoot by a few. All 96 without
  // the bound, about 36 with the whole 32 MiB for one shard.
  EXPECT_GE(most_held, 12u);
  EXPECT_LE(most_held, 21u);
}

}  // namespace
}  // namespace surge::engine
