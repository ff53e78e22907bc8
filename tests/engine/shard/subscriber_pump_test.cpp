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

#include "engine/subscriber_settings.hpp"

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

constexpr double unix0 = 1'700'000'000;

class SubscriberPump : public ::testing::Test {
 protected:
  subscriber_state& add(std::int64_t id, double rate = 20, double burst = 1,
                        std::int64_t batch_max = 1, std::string url = "http://partner.test/hook") {
    storage::subscriber_row row;
    row.id = id;
    row.url = std::move(url);
    row.secret = "secret";
    row.rate_per_sec = rate;
    row.burst = burst;
    row.batch_max = batch_max;
    auto state =
        std::make_unique<subscriber_state>(row, derive_settings(row, config_), t0, unix0, config_);
    auto& sub = *state;
    // This process's share of the persisted bucket, as a claim's answer grants it.
    sub.limits.allowance().ask(rate, t0);
    sub.limits.allowance().granted(100, t0, 0s);
    subscribers_.emplace(id, std::move(state));
    slots_.recount_rates(subscribers_, t0);
    return sub;
  }

  // A row of `sub` claimed into its ready queue, as a claim's answer brings it.
  void claim(subscriber_state& sub, std::int64_t id, std::size_t payload_bytes = 100,
             double lease = unix0 + 60, double created_at = unix0 - 10) {
    storage::claimed_row row;
    row.id = id;
    row.subscriber_id = sub.settings.id;
    row.payload = '"' + std::string(payload_bytes - 2, 'x') + '"';
    row.payload_bytes = static_cast<std::int64_t>(row.payload.size());
    row.created_at = created_at;
    row.lease = lease;
    std::vector<storage::claimed_row> claimed{std::move(row)};
    std::vector<subscriber_state*> joined;
    rows_.take_answer(claimed, subscribers_, false, joined);
  }

  void run(subscriber_state& sub, steady::duration after = 0s, bool stopping = false) {
    pump_.run(sub, {.steady = t0 + after, .wall = wall0 + after}, stopping);
  }

  std::vector<storage::outcome> written() {
    rows_.flush();
    std::vector<storage::outcome> out;
    for (auto& write : writes_) {
      for (auto& outcome : write.outcomes) out.push_back(outcome);
    }
    writes_.clear();
    return out;
  }

  const steady::time_point t0 = steady::time_point{} + 1h;
  const std::chrono::system_clock::time_point wall0 =
      std::chrono::system_clock::time_point{} + std::chrono::seconds(1'700'000'000);
  scheduler_config config_;
  drain_metrics metrics_{1};
  std::vector<outcome_write> writes_;
  subscriber_map subscribers_;
  shard_rows rows_{config_, 1, metrics_.counters, writes_};
  shard_slots slots_{config_, 1, t0};  // one request in flight at a time
  wake_schedule wakes_;
  attempt_book attempts_;
  std::vector<send_action> sends_;
  std::vector<http_result> unsendable_;
  row_checks checks_{.max_payload_bytes = 1000, .lease_margin = std::chrono::seconds(31)};
  subscriber_pump pump_{
      {.checks = checks_, .user_agent = "surge-test"},
      {.rows = rows_,
       .slots = slots_,
       .wakes = wakes_,
       .attempts = attempts_,
       .sends = sends_,
       .metrics = metrics_},
      [this](attempt_state&, const http_result& result) { unsendable_.push_back(result); }};
};

TEST_F(SubscriberPump, AReadyRowWithATokenAndASlotStartsAnAttemptWithItsRequest) {
  auto& sub = add(7);
  claim(sub, 1);
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
  auto& sub = add(7, 20, 10);
  std::uint32_t writer = 90;
  while (sub.line.arrive({.attempt = writer, .give_up_at = t0 + 1h}, sub.limits.gate(false), t0)) {
    ASSERT_LT(++writer, 200u);
  }
  ASSERT_TRUE(sub.limits.on_announced({{proto::quota_field::x_limit, "5"},
                                       {proto::quota_field::x_remaining, "4"},
                                       {proto::quota_field::x_reset, "30"}},
                                      0, std::nullopt, wall0, t0));
  auto lines_woken = [&] {
    int woken = 0;
    wakes_.run_queued([&](subscriber_state&) { ++woken; }, [](subscriber_state&) {});
    return woken;
  };
  run(sub, 10s);
  EXPECT_EQ(lines_woken(), 0);
  run(sub, 31s);
  EXPECT_EQ(lines_woken(), 1);
}

TEST_F(SubscriberPump, AStoppingShardStartsNothing) {
  auto& sub = add(7);
  claim(sub, 1);
  run(sub, 0s, true);
  EXPECT_TRUE(sends_.empty());
  EXPECT_EQ(sub.ready.size(), 1u);
}

TEST_F(SubscriberPump, WithoutATokenItWaitsArmedForTheTokenAndCountsTheWait) {
  slots_ = shard_slots(config_, 10, t0);
  auto& sub = add(7, 20, 1);  // a token every 50 ms
  claim(sub, 1);
  claim(sub, 2);
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
  auto& first = add(7, 100, 10);
  auto& second = add(8, 100, 10);
  claim(first, 1);
  claim(second, 2);
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
  auto& sub = add(7, 20, 1, 10);
  sub.settings.batch_linger = 500ms;
  claim(sub, 1);
  claim(sub, 2);
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
  auto& sub = add(7, 100, 10);
  claim(sub, 1, 2000);                           // over max_payload_bytes
  claim(sub, 2, 100, unix0 + 20);                // its lease ends before an attempt could
  claim(sub, 3, 100, unix0 + 60, unix0 - 7200);  // fine here: no retry window
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
  subscriber_pump pump({.checks = checks_, .user_agent = "surge-test"},
                       {.rows = rows_,
                        .slots = slots_,
                        .wakes = wakes_,
                        .attempts = attempts_,
                        .sends = sends_,
                        .metrics = metrics_},
                       [](attempt_state&, const http_result&) {});
  auto& sub = add(7);
  claim(sub, 1, 100, unix0 + 60, unix0 - 7200);
  pump.run(sub, {.steady = t0, .wall = wall0}, false);
  EXPECT_TRUE(sends_.empty());
  const auto out = written();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, storage::outcome_kind::dead);
  EXPECT_EQ(out[0].last_error.rfind("retry window passed: enqueued 7200 s ago, limit 3600 s", 0),
            0u);
}

TEST_F(SubscriberPump, AnUnusableSubscribersRowsAreDeadLetteredWithTheReason) {
  auto& sub = add(7, 20, 1, 1, "not a url");
  claim(sub, 1);
  claim(sub, 2);
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
