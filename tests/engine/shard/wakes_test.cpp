// The shard's wakes on their own: armed times, stale entries, and the queued looks' order.
#include "engine/shard/wakes.hpp"

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/subscriber_settings.hpp"

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;
using kind = wake_schedule::kind;

class WakeSchedule : public ::testing::Test {
 protected:
  const clock::time_point t0 = clock::time_point{} + 1h;

  WakeSchedule() {
    for (int id = 1; id <= 3; ++id) {
      storage::subscriber_row row;
      row.id = id;
      row.url = "http://partner.test/hook";
      row.secret = "secret";
      subs_.push_back(
          std::make_unique<subscriber_state>(row, derive_settings(row, config_), t0, 1e9, config_));
    }
  }

  // The pumps and lines run by run_queued, in order ("p1", "l2"...).
  std::vector<std::string> run() {
    std::vector<std::string> ran;
    wakes_.run_queued(
        [&](subscriber_state& sub) { ran.push_back("l" + std::to_string(sub.settings.id)); },
        [&](subscriber_state& sub) { ran.push_back("p" + std::to_string(sub.settings.id)); });
    return ran;
  }

  subscriber_state& sub(int id) { return *subs_[static_cast<std::size_t>(id - 1)]; }

  scheduler_config config_;
  std::vector<std::unique_ptr<subscriber_state>> subs_;
  wake_schedule wakes_;
};

TEST_F(WakeSchedule, AnEarlierWakeReplacesALaterOneAndTheStaleEntryIsSkipped) {
  wakes_.arm(sub(1), kind::pump, t0 + 50ms);
  wakes_.arm(sub(1), kind::pump, t0 + 10ms);
  wakes_.arm(sub(1), kind::pump, t0 + 30ms);  // later than the one armed: kept at 10 ms
  EXPECT_EQ(wakes_.next(), t0 + 10ms);
  wakes_.queue_due(t0 + 10ms);
  EXPECT_EQ(run(), std::vector<std::string>{"p1"});
  EXPECT_EQ(sub(1).pump_at, clock::time_point::max());
  wakes_.queue_due(t0 + 60ms);  // the 50 ms entry is stale: the pump was woken already
  EXPECT_TRUE(run().empty());
}

TEST_F(WakeSchedule, OnlyWhatIsDueIsQueuedAndEachLookRunsOnce) {
  wakes_.arm(sub(1), kind::pump, t0 + 10ms);
  wakes_.arm(sub(2), kind::pump, t0 + 20ms);
  wakes_.queue_due(t0 + 15ms);
  wakes_.queue_pump(sub(1));  // asked again before it ran: still once
  EXPECT_EQ(run(), std::vector<std::string>{"p1"});
  EXPECT_EQ(wakes_.next(), t0 + 20ms);
}

TEST_F(WakeSchedule, APumpQueuedWhileOthersRunRunsInTheSameEvent) {
  std::vector<std::string> ran;
  wakes_.queue_pump(sub(1));
  wakes_.queue_pump(sub(2));
  wakes_.run_queued(
      [&](subscriber_state& s) { ran.push_back("l" + std::to_string(s.settings.id)); },
      [&](subscriber_state& s) {
        ran.push_back("p" + std::to_string(s.settings.id));
        // A pump that frees a slot wakes the next waiter before the event returns.
        if (s.settings.id == 1) wakes_.queue_pump(sub(3));
      });
  EXPECT_EQ(ran, (std::vector<std::string>{"p1", "p2", "p3"}));
}

TEST_F(WakeSchedule, AWireLineIsQueuedOnlyWithWritersWaitingAndRunsBeforeThePumps) {
  wakes_.queue_line(sub(1));
  EXPECT_TRUE(run().empty());  // nobody waits at its gate
  auto paused = sub(1).limits.gate(false);
  paused.paused_until = t0 + 1s;  // a pause: the writer waits in line
  EXPECT_FALSE(sub(1).line.arrive({.attempt = 1, .give_up_at = t0 + 1h}, paused, t0).has_value());
  ASSERT_FALSE(sub(1).line.empty());
  wakes_.arm(sub(1), kind::line, t0 + 5ms);
  wakes_.queue_pump(sub(2));
  wakes_.queue_due(t0 + 5ms);
  EXPECT_EQ(run(), (std::vector<std::string>{"l1", "p2"}));
}

TEST(WakeGrid, ATimeIsRoundedUpToTheGridsNextStepUnlessItIsOnOne) {
  const clock::time_point t0 = clock::time_point{} + 1h;  // on every grid below
  EXPECT_EQ(on_wake_grid(t0, 1ms), t0);
  EXPECT_EQ(on_wake_grid(t0 + 1us, 1ms), t0 + 1ms);
  EXPECT_EQ(on_wake_grid(t0 + 999us, 1ms), t0 + 1ms);
  EXPECT_EQ(on_wake_grid(t0 + 1001us, 1ms), t0 + 2ms);
  EXPECT_EQ(on_wake_grid(t0 + 1us, clock::duration::zero()), t0 + 1us) << "no grid";
  EXPECT_EQ(on_wake_grid(clock::time_point::max(), 1ms), clock::time_point::max()) << "none armed";
}

// A subscriber whose burst holds the token it waits for and a step's refill besides loses no
// rate when woken a step late (its bucket keeps filling). One with a burst of 1, or whose rate
// fills the rest of its burst within a step, would lose each moment after its token, so it is
// woken exactly, earlier than the first though armed later.
TEST_F(WakeSchedule, OnTheGridABucketThatKeepsFillingWaitsForTheStepAndAFullOneDoesNot) {
  wake_schedule on_grid(1ms);
  storage::subscriber_row row;
  row.id = 4;
  row.url = "http://partner.test/hook";
  row.secret = "secret";
  row.burst = 1;
  subscriber_state burst_of_one(row, derive_settings(row, config_), t0, 1e9, config_);
  row.id = 5;
  row.burst = 2;
  row.rate_per_sec = 5000;  // 5 tokens a step, and room for 1
  subscriber_state fast(row, derive_settings(row, config_), t0, 1e9, config_);
  ASSERT_TRUE(sub(1).limits.refills_while_waiting(1ms));  // 5/s, burst 10
  ASSERT_FALSE(burst_of_one.limits.refills_while_waiting(1ms));
  ASSERT_FALSE(fast.limits.refills_while_waiting(1ms));
  on_grid.arm(fast, kind::pump, t0 + 400us);
  EXPECT_EQ(fast.pump_at, t0 + 400us);
  on_grid.arm(sub(1), kind::pump, t0 + 200us);
  on_grid.arm(burst_of_one, kind::pump, t0 + 300us);
  EXPECT_EQ(on_grid.next(), t0 + 300us);
  EXPECT_EQ(sub(1).pump_at, t0 + 1ms);
  std::vector<std::int64_t> ran;
  const auto run_due = [&](clock::time_point now) {
    ran.clear();
    on_grid.queue_due(now);
    on_grid.run_queued([](subscriber_state&) {},
                       [&](subscriber_state& s) { ran.push_back(s.settings.id); });
  };
  run_due(t0 + 300us);
  EXPECT_EQ(ran, std::vector<std::int64_t>{4});
  run_due(t0 + 400us);
  EXPECT_EQ(ran, std::vector<std::int64_t>{5});
  EXPECT_EQ(on_grid.next(), t0 + 1ms);
  run_due(t0 + 1ms);
  EXPECT_EQ(ran, std::vector<std::int64_t>{1});
}

}  // namespace
}  // namespace surge::engine
