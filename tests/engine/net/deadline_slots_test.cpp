// One timer for every exchange's deadline (engine/net/deadline_slots.hpp): when it must be set
// earlier, what it expires when it wakes, and slots that stay right as exchanges finish in any
// order. A clock passed in, no timer.
#include "engine/net/deadline_slots.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <vector>

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using time_point = std::chrono::steady_clock::time_point;

struct exchange {
  int id = 0;
  std::size_t deadline_slot = 99;
};

const time_point t0{std::chrono::seconds(1000)};

TEST(DeadlineSlots, TheTimerIsSetAgainOnlyForAnEarlierDeadline) {
  deadline_slots<exchange> slots;
  std::array<exchange, 3> e{{{1}, {2}, {3}}};
  EXPECT_TRUE(slots.add(e[0], t0 + 8s));
  EXPECT_FALSE(slots.add(e[1], t0 + 9s)) << "later than where the timer is";
  EXPECT_TRUE(slots.add(e[2], t0 + 5s)) << "a retry keeps its attempt's earlier deadline";
  EXPECT_EQ(slots.wake_at(), t0 + 5s);
}

TEST(DeadlineSlots, AWakeExpiresWhatIsDueOnceAndSaysWhenToWakeNext) {
  deadline_slots<exchange> slots;
  std::array<exchange, 3> e{{{1}, {2}, {3}}};
  slots.add(e[0], t0 + 1s);
  slots.add(e[1], t0 + 3s);
  slots.add(e[2], t0 + 2s);
  std::vector<int> expired;
  auto note = [&expired](exchange& x) { expired.push_back(x.id); };

  EXPECT_EQ(slots.on_wake(t0 + 500ms, note), t0 + 1s) << "woken early: nothing is due";
  EXPECT_TRUE(expired.empty());
  EXPECT_EQ(slots.on_wake(t0 + 2s, note), t0 + 3s);
  EXPECT_EQ(expired, (std::vector<int>{1, 3}));
  // An expired exchange stays until it finishes, but is not expired again.
  EXPECT_EQ(slots.on_wake(t0 + 2500ms, note), t0 + 3s);
  EXPECT_EQ(expired.size(), 2u);
  EXPECT_EQ(slots.on_wake(t0 + 3s, note), std::nullopt) << "nothing left to wait for";
  EXPECT_EQ(expired, (std::vector<int>{1, 3, 2}));
  EXPECT_EQ(slots.size(), 3u);
  // With the timer unset, a new exchange sets it.
  exchange later{4};
  EXPECT_TRUE(slots.add(later, t0 + 20s));
}

TEST(DeadlineSlots, ExchangesFinishingInAnyOrderLeaveTheRestWatched) {
  deadline_slots<exchange> slots;
  std::array<exchange, 4> e{{{1}, {2}, {3}, {4}}};
  for (std::size_t i = 0; i < e.size(); ++i) slots.add(e[i], t0 + std::chrono::seconds(1 + i));
  EXPECT_FALSE(slots.remove(e[1]));  // from the middle: the last one takes its slot
  EXPECT_FALSE(slots.remove(e[0]));
  EXPECT_EQ(slots.size(), 2u);
  // Each one still watched knows its place, so taking it out later takes out the right one.
  std::array<std::size_t, 2> places{e[2].deadline_slot, e[3].deadline_slot};
  std::sort(places.begin(), places.end());
  EXPECT_EQ(places, (std::array<std::size_t, 2>{0, 1}));
  std::vector<int> expired;
  slots.on_wake(t0 + 1h, [&expired](exchange& x) { expired.push_back(x.id); });
  std::sort(expired.begin(), expired.end());
  EXPECT_EQ(expired, (std::vector<int>{3, 4})) << "the finished ones are never expired";
  EXPECT_FALSE(slots.remove(e[3]));
  EXPECT_TRUE(slots.remove(e[2])) << "the last one out: the timer is not needed";
  EXPECT_EQ(slots.wake_at(), time_point::max());
}

}  // namespace
}  // namespace surge::engine
