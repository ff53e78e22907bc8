// Connections sized by need, on a simulated clock: an origin pool opens a connection while it
// holds fewer than the requests its origin had at once on average (with headroom), and makes a
// request wait for a busy one beyond that, unless too few are busy for one to come back soon;
// before it has measured a window, or with waiting off, it opens as requests need.
#include <gtest/gtest.h>

#include "engine/net/connection_need.hpp"

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
const connection_need::time_point t0{std::chrono::hours(1)};

// Keeps `need` told of how many requests its origin has at once.
class requests_at_once {
 public:
  explicit requests_at_once(connection_need& need) : need_(need) {}
  void set(int n, connection_need::time_point now) {
    for (; count_ < n; ++count_) need_.on_request(now);
    for (; count_ > n; --count_) need_.on_done(now);
  }

 private:
  connection_need& need_;
  int count_ = 0;
};

TEST(ConnectionNeed, TheAverageAtOnceWithHeadroomBoundsTheOpenConnections) {
  connection_need need({});  // 1 s windows, headroom 1.25, 2 spare, 4 busy per waiting
  requests_at_once origin(need);
  origin.set(20, t0);
  const auto now = t0 + 3s;
  // 20 at once x 1.25 = 25; + 2.
  ASSERT_EQ(need.need(now), 27);
  EXPECT_TRUE(need.may_open(26, 0, now));
  EXPECT_FALSE(need.may_open(27, 0, now)) << "at its need a pool lends a busy connection instead";
  EXPECT_FALSE(need.may_open(27, 5, now)) << "27 busy serve 6 waiting soon enough";
  EXPECT_TRUE(need.may_open(27, 6, now)) << "a seventh would wait too long: it opens";
}

TEST(ConnectionNeed, AnAverageOverTheWindowNotItsPeak) {
  connection_need need({});
  requests_at_once origin(need);
  // 40 at once for a tenth of each second, 10 the rest: 13 on average.
  for (int second = 0; second < 3; ++second) {
    const auto at = t0 + std::chrono::seconds(second);
    origin.set(40, at);
    origin.set(10, at + 100ms);
  }
  EXPECT_EQ(need.need(t0 + 3s), 19) << "13 x 1.25 + 2, where a pool sized by its peak holds 40";
}

TEST(ConnectionNeed, OpensAsRequestsNeedUntilAWindowIsMeasured) {
  connection_need need({});
  requests_at_once origin(need);
  // The start of a drain: a burst, with nothing answered yet.
  origin.set(500, t0);
  EXPECT_EQ(need.need(t0 + 10ms), std::nullopt);
  EXPECT_TRUE(need.may_open(499, 0, t0 + 900ms));
  // A window later the burst is what it measured.
  EXPECT_EQ(need.need(t0 + 1000ms), 627);
}

TEST(ConnectionNeed, TheNeedFollowsTheDemandWithinAWindow) {
  connection_need need({});
  requests_at_once origin(need);
  origin.set(20, t0);
  ASSERT_EQ(need.need(t0 + 3s), 27);
  // The partner slows down (or its rate doubles): requests that wait count all the same, so
  // the need grows with the demand, not with what the pool let through.
  origin.set(40, t0 + 3s);
  EXPECT_EQ(need.need(t0 + 3500ms), 40) << "half the window at 20, half at 40";
  EXPECT_EQ(need.need(t0 + 4s), 52);
  // And shrinks when it falls.
  origin.set(8, t0 + 4s);
  EXPECT_EQ(need.need(t0 + 5s), 12);
}

TEST(ConnectionNeed, ABurstAfterAQuietSpellOpensAtOnce) {
  connection_need need({});
  requests_at_once origin(need);
  origin.set(20, t0);
  origin.set(0, t0 + 3s);
  // Nothing for seconds: the need is the spare. The burst that comes next finds too few busy
  // connections for waiting to be short, so it opens instead.
  const auto now = t0 + 10s;
  ASSERT_EQ(need.need(now), 2);
  EXPECT_TRUE(need.may_open(2, 0, now));
  EXPECT_TRUE(need.may_open(10, 5, now));
}

TEST(ConnectionNeed, NoWaitingOpensAConnectionPerConcurrentRequest) {
  connection_need_config config;
  config.max_wait = 0ms;
  connection_need need(config);
  requests_at_once origin(need);
  origin.set(20, t0);
  EXPECT_TRUE(need.may_open(1000, 0, t0 + 3s));
}

}  // namespace
}  // namespace surge::engine
