// What the storage thread bounds a coalescing subscriber's claims by (sweep_judgement), on a
// simulated clock.
#include "engine/storage_thread/sweep_judgement.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
const sweep_judgement::clock::time_point t0{std::chrono::seconds(1000)};

std::vector<storage::subscriber_demand> asked() {
  return {{.subscriber_id = 1, .rows = 5, .judged_through = 0},
          {.subscriber_id = 2, .rows = 5}};  // not coalescing: never bounded
}

TEST(SweepJudgement, ClaimsStopAtWhatTheSweepJudgedAndNothingBeforeItsFirstSweep) {
  sweep_judgement judgement(t0);
  auto demand = asked();
  judgement.bound(demand, t0 + 1s);
  EXPECT_EQ(demand[0].judged_through, 0);
  EXPECT_FALSE(demand[1].judged_through);
  judgement.judged(1, 42, t0 + 2s);
  demand = asked();
  judgement.bound(demand, t0 + 3s);
  EXPECT_EQ(demand[0].judged_through, 42);
}

// A sweep that keeps failing must not stop the subscriber: a stale judgement bounds nothing.
TEST(SweepJudgement, AJudgementOlderThanItsAllowanceNoLongerHoldsRowsBack) {
  sweep_judgement judgement(t0);
  auto demand = asked();
  judgement.bound(demand, t0 + sweep_judgement::stale_after + 1s);  // never swept
  EXPECT_FALSE(demand[0].judged_through);
  judgement.judged(1, 42, t0 + 40s);
  demand = asked();
  judgement.bound(demand, t0 + 40s + sweep_judgement::stale_after);
  EXPECT_EQ(demand[0].judged_through, 42);
  demand = asked();
  judgement.bound(demand, t0 + 41s + sweep_judgement::stale_after);
  EXPECT_FALSE(demand[0].judged_through);
}

}  // namespace
}  // namespace surge::engine
