// A subscriber's pump on the shard's machines, without a core: what it starts (the attempt, its
// rows, slots and request), what it waits for (a token, a slot, a batch's linger) and when it
// looks again, and the rows it cannot send (too large, a lease too short, past the seed001 retry
// window, an unusable subscriber). The clock is passed in.
#include "engine/shard/subscriber_pump.hpp"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/engine/shard/shard_machines.hpp"

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using testing::unix0;

class SubscriberPump : public testing::shard_machines {
 protected:
  SubscriberPump() : shard_machines(1) {}  // one request in flight at a time

  subscriber_pump pump_with(const row_checks& checks) {
    return subscriber_pump(
        {.checks = checks, .user_agent = "surge-test"},
        {.rows = rows_,
         .slots = slots_,
         .wakes = wakes_,
         .attempts = attempts_,
         .sends = sends_,
         .metrics = metrics_},
        [this](attempt_state&, const http_result& result) { unsendable_.push_back(result); });
  }

  void run(subscriber_state& sub, steady::duration after = 0s, bool stopping = false) {
    pump_.run(sub, at(after), stopping);
  }

  attempt_book attempts_;
  std::vector<send_action> sends_;
  std::vector<http_result> unsendable_;
  row_checks checks_{.max_payload_bytes = 1000, .lease_margin = std::chrono::seconds(31)};
  subscriber_pump pump_ = pump_with(checks_);
};

TEST_F(SubscriberPump, AReadyRowWithATokenAndASlotStartsAnAttemptWithItsRequest) {
  auto& sub = add({});
  claim(sub, 1, 1);
  run(sub);
  ASSERT_EQ(sends_.size(), 1u);
  const auto& send = sends_[0];
  EXPECT_EQ(send.target, sub.settings.target);
  EXPECT_NE(send.request.find("POST /hook HTTP/1.1"), std::string::npos);
  EXPECT_NE(send.request.find("User-Agent: surge-test"), std::string::npos);
  EXPECT_NE(send.request.find(std::string(98, 'x')), std::string::npos);
  const auto& attempt = attempts_[send.attempt];
  EXPECT_EQ(attempt.sub, &sub);
  ASSERT_EQ(attempt.rows.size(), 1u);
  EXPECT_EQ(attempt.rows[0].id, 1);
  EXPECT_DOUBLE_EQ(attempt.started_unix, unix0);
  EXPECT_TRUE(sub.ready.empty());
  EXPECT_EQ(sub.in_flight, 1);
  EXPECT_EQ(slots_.in_flight(), 1);
  EXPECT_EQ(metrics_.counters.in_flight.load(), 1);
  EXPECT_TRUE(unsendable_.empty());
}

// An announced limit ends at its reset: the writers waiting at the gate look again then.
TEST_F(SubscriberPump, AnAnnouncedLimitThatEndsWakesTheWritersWaitingAtTheGate) {
  auto& sub = add({.burst = 10});
  writer_waits_at_gate(sub);
  ASSERT_TRUE(sub.limits.on_announced(announced("5", "4", "30"), 0, std::nullopt, wall0, t0));
  run(sub, 10s);
  EXPECT_EQ(lines_woken(), 0);
  run(sub, 31s);
  EXPECT_EQ(lines_woken(), 1);
}

TEST_F(SubscriberPump, AStoppingShardStartsNothing) {
  auto& sub = add({});
  claim(sub, 1, 1);
  run(sub, 0s, true);
  EXPECT_TRUE(sends_.empty());
  EXPECT_EQ(sub.ready.size(), 1u);
}

TEST_F(SubscriberPump, WithoutATokenItWaitsArmedForTheTokenAndCountsTheWait) {
  slots_ = shard_slots(config_, 10, t0);
  auto& sub = add({.burst = 1});  // a token every 50 ms
  claim(sub, 1, 1);
  claim(sub, 2, 2);
  run(sub);
  ASSERT_EQ(sends_.size(), 1u);
  EXPECT_EQ(sub.token_wait_since, t0);
  EXPECT_GT(wakes_.next(), t0);
  EXPECT_LE(wakes_.next(), t0 + 51ms);  // rounded up to the next tick
  const auto wake = wakes_.next() - t0;
  run(sub, wake);
  ASSERT_EQ(sends_.size(), 2u);
  EXPECT_FALSE(sub.token_wait_since);
  EXPECT_DOUBLE_EQ(metrics_.token_wait_seconds.load(), std::chrono::duration<double>(wake).count());
}

TEST_F(SubscriberPump, AFullShardQueuesTheSubscriberForTheNextFreeSlot) {
  auto& first = add({.rate = 100});
  auto& second = add({.id = 8, .rate = 100});
  claim(first, 1, 1);
  claim(second, 2, 2);
  run(first);
  run(second);
  ASSERT_EQ(sends_.size(), 1u);
  EXPECT_EQ(second.ready.size(), 1u);
  std::vector<subscriber_state*> woken;
  const auto& attempt = attempts_[sends_[0].attempt];
  slots_.end(*attempt.origin, attempt.slots, t0 + 10ms, woken);
  ASSERT_EQ(woken.size(), 1u);
  EXPECT_EQ(woken[0], &second);
}

TEST_F(SubscriberPump, ABatchLingersWithItsTokenInTheBucketThenGoesAsOneRequest) {
  auto& sub = add({.burst = 1, .batch_max = 10});
  sub.settings.batch_linger = 500ms;
  claim(sub, 1, 1);
  claim(sub, 2, 2);
  run(sub);
  EXPECT_TRUE(sends_.empty());
  EXPECT_EQ(sub.batch_wait_since, t0);
  EXPECT_EQ(wakes_.next(), t0 + 500ms);
  run(sub, 500ms);
  ASSERT_EQ(sends_.size(), 1u);
  EXPECT_TRUE(attempts_[sends_[0].attempt].batched);
  EXPECT_EQ(attempts_[sends_[0].attempt].rows.size(), 2u);
  EXPECT_FALSE(sub.batch_wait_since);
}

TEST_F(SubscriberPump, RowsThatCannotGoAreDeadLetteredOrGivenBack) {
  auto& sub = add({.rate = 100});
  claim(sub, 1, 1, {.payload_bytes = 2000});       // over max_payload_bytes
  claim(sub, 2, 2, {.lease = unix0 + 20});         // its lease ends before an attempt could
  claim(sub, 3, 3, {.created_at = unix0 - 7200});  // fine here: no retry window
  run(sub);
  const auto out = written();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].delivery_id, 1);
  EXPECT_EQ(out[0].kind, storage::outcome_kind::dead);
  EXPECT_EQ(out[0].last_error, "payload too large: 2000 bytes, limit 1000");
  EXPECT_EQ(out[1].delivery_id, 2);
  EXPECT_EQ(out[1].kind, storage::outcome_kind::release);
  ASSERT_EQ(sends_.size(), 1u);
  EXPECT_EQ(attempts_[sends_[0].attempt].rows[0].id, 3);
}

TEST_F(SubscriberPump, ARowPastTheSeed001RetryWindowIsDeadLettered) {
  checks_.retry_window_seconds = 3600;
  auto pump = pump_with(checks_);
  auto& sub = add({});
  claim(sub, 1, 1, {.created_at = unix0 - 7200});
  pump.run(sub, at(0s), false);
  EXPECT_TRUE(sends_.empty());
  const auto out = written();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, storage::outcome_kind::dead);
  EXPECT_EQ(out[0].last_error.rfind("retry window passed: enqueued 7200 s ago, limit 3600 s", 0),
            0u);
}

TEST_F(SubscriberPump, AnUnusableSubscribersRowsAreDeadLetteredWithTheReason) {
  auto& sub = add({.url = "not a url"});
  claim(sub, 1, 1);
  claim(sub, 2, 2);
  run(sub);
  EXPECT_TRUE(sends_.empty());
  const auto out = written();
  ASSERT_EQ(out.size(), 2u);
  for (const auto& outcome : out) {
    EXPECT_EQ(outcome.kind, storage::outcome_kind::dead);
    EXPECT_EQ(outcome.last_error.rfind("malformed URL", 0), 0u) << outcome.last_error;
  }
}

}  // namespace
}  // namespace surge::engine
