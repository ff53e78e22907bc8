// The line at a subscriber's wire gate (subscriber_state::wait_for_wire): first come first served,
// and it gives up rather than write after a stop, during a pause that outlasts the lease, or when
// the next token is due too late. Real io_context and clock, no sockets. Also the answer given
// without waiting (subscriber_state::wire_now), which most writes take, at a clock reading the
// test passes in.
#include "engine/shard/subscriber.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

namespace surge::engine {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

struct waiter_result {
  int index = 0;
  bool passed = false;
  steady::time_point at{};
};

class WireLine : public ::testing::Test {
 protected:
  std::unique_ptr<subscriber_state> make(double rate, std::int64_t burst, double tokens) {
    storage::subscriber_row row;
    row.id = 1;
    row.url = "http://127.0.0.1:9/hook";
    row.secret = "test-secret";
    row.rate_per_sec = rate;
    row.burst = burst;
    row.tokens = tokens;
    row.tokens_updated_at = 4e9;  // the future: no refill for elapsed time
    const scheduler_config config;
    return std::make_unique<subscriber_state>(row, derive_settings(row, config), io.get_executor(),
                                              4e9, config);
  }

  void wait_in_line(subscriber_state& sub, int index, steady::time_point give_up_at) {
    asio::co_spawn(
        io,
        [&, index, give_up_at]() -> asio::awaitable<void> {
          const bool passed = co_await sub.wait_for_wire(give_up_at, stopping, false);
          results.push_back({index, passed, steady::now()});
        },
        asio::detached);
  }

  asio::io_context io;
  bool stopping = false;
  std::vector<waiter_result> results;
};

TEST_F(WireLine, WritesGoOutInArrivalOrderOneIntervalApart) {
  auto sub = make(20.0, 1, 1);  // one token now, then one per 50 ms
  const auto start = steady::now();
  for (int i = 0; i < 3; ++i) wait_in_line(*sub, i, start + 10s);
  io.run();
  ASSERT_EQ(results.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(results[i].index, i);
    EXPECT_TRUE(results[i].passed);
  }
  // Never early (the gate is what the partner's limiter will judge).
  EXPECT_GE(results[1].at - results[0].at, 50ms - 1ms);
  EXPECT_GE(results[2].at - results[1].at, 50ms - 1ms);
  EXPECT_TRUE(sub->wire_line.empty());
}

TEST_F(WireLine, AStopSendsNothingMore) {
  auto sub = make(1.0, 1, 1);
  const auto start = steady::now();
  for (int i = 0; i < 3; ++i) wait_in_line(*sub, i, start + 10s);
  asio::post(io, [&] {
    stopping = true;
    sub->notify_wire();
  });
  io.run();
  ASSERT_EQ(results.size(), 3u);
  int passed = 0;
  for (const auto& r : results) passed += r.passed ? 1 : 0;
  EXPECT_EQ(passed, 1) << "only the one that had its token before the stop";
  EXPECT_LT(steady::now() - start, 1s);
}

TEST_F(WireLine, APauseLongerThanTheLeaseAllowsGivesUpAtOnce) {
  auto sub = make(10.0, 5, 5);
  const auto start = steady::now();
  sub->paused_until = start + 30s;
  wait_in_line(*sub, 0, start + 5s);
  io.run();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].passed);
  EXPECT_LT(results[0].at - start, 1s);
  EXPECT_DOUBLE_EQ(sub->wire.tokens_at(steady::now()), 5.0) << "a give-up takes no token";
}

TEST_F(WireLine, AShortPauseIsWaitedOut) {
  auto sub = make(10.0, 5, 5);
  const auto start = steady::now();
  sub->paused_until = start + 100ms;
  wait_in_line(*sub, 0, start + 5s);
  io.run();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].passed);
  EXPECT_GE(results[0].at, start + 100ms);
}

TEST_F(WireLine, ATokenDueAfterTheGiveUpTimeIsNotWaitedFor) {
  auto sub = make(0.1, 1, 0);  // the next token in 10 s
  const auto start = steady::now();
  wait_in_line(*sub, 0, start + 2s);
  wait_in_line(*sub, 1, start + 2s);
  io.run();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_FALSE(results[0].passed);
  EXPECT_FALSE(results[1].passed);
  EXPECT_LT(steady::now() - start, 1s) << "the line behind it does not wait either";
  EXPECT_TRUE(sub->wire_line.empty());
}

TEST_F(WireLine, WithNobodyAheadAndATokenTheWriteGoesWithoutWaiting) {
  auto sub = make(20.0, 1, 1);
  const auto now = steady::now();
  EXPECT_EQ(sub->wire_now(now + 10s, stopping, false, now), std::optional<bool>(true));
  // The token is taken: the next write has to wait for the next one, 50 ms on.
  EXPECT_EQ(sub->wire_now(now + 10s, stopping, false, now), std::nullopt);
  EXPECT_EQ(sub->wire_now(now + 10s, stopping, false, now + 50ms), std::optional<bool>(true));
}

TEST_F(WireLine, NoWriteGoesPastTheOnesWaitingInLine) {
  auto sub = make(20.0, 5, 5);
  asio::steady_timer ahead(io);
  sub->wire_line.push_back(&ahead);
  const auto now = steady::now();
  EXPECT_EQ(sub->wire_now(now + 10s, stopping, false, now), std::nullopt);
  EXPECT_DOUBLE_EQ(sub->wire.tokens_at(now), 5.0) << "nothing taken for the one sent to wait";
  sub->wire_line.clear();
  EXPECT_EQ(sub->wire_now(now + 10s, stopping, false, now), std::optional<bool>(true));
}

TEST_F(WireLine, WithoutWaitingItGivesUpWhenWaitingCouldNotHelp) {
  auto sub = make(10.0, 5, 5);
  const auto now = steady::now();
  EXPECT_EQ(sub->wire_now(now, stopping, false, now), std::optional<bool>(false))
      << "the lease's give-up time has come";
  sub->paused_until = now + 30s;
  EXPECT_EQ(sub->wire_now(now + 5s, stopping, false, now), std::optional<bool>(false))
      << "a pause outlasting the lease";
  sub->paused_until = {};
  stopping = true;
  EXPECT_EQ(sub->wire_now(now + 5s, stopping, false, now), std::optional<bool>(false));
  stopping = false;
  sub->disowned = true;
  EXPECT_EQ(sub->wire_now(now + 5s, stopping, false, now), std::optional<bool>(false));
  EXPECT_DOUBLE_EQ(sub->wire.tokens_at(now), 5.0) << "a give-up takes no token";

  auto slow = make(0.1, 1, 0);  // the next token in 10 s
  EXPECT_EQ(slow->wire_now(now + 2s, stopping, false, now), std::optional<bool>(false));
  EXPECT_EQ(slow->wire_now(now + 20s, stopping, false, now), std::nullopt) << "worth waiting";
}

TEST_F(WireLine, AShortPauseIsLeftToTheWait) {
  auto sub = make(10.0, 5, 5);
  const auto now = steady::now();
  sub->paused_until = now + 100ms;
  EXPECT_EQ(sub->wire_now(now + 5s, stopping, false, now), std::nullopt);
  EXPECT_EQ(sub->wire_now(now + 5s, stopping, false, now + 100ms), std::optional<bool>(true));
}

}  // namespace
}  // namespace surge::engine
