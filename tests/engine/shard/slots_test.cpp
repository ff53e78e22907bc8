// The shard's and its origins' slots on their own, with the clock passed in: who a freed slot
// goes to, and what the pump is told while slots are promised.
#include "engine/shard/slots.hpp"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/subscriber_settings.hpp"

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

class ShardSlots : public ::testing::Test {
 protected:
  const clock::time_point t0 = clock::time_point{} + 1h;

  subscriber_state& add(std::int64_t id, const std::string& host) {
    storage::subscriber_row row;
    row.id = id;
    row.url = "http://" + host + "/hook/" + std::to_string(id);
    row.secret = "secret";
    subscribers_.push_back(
        std::make_unique<subscriber_state>(row, derive_settings(row, config_), t0, 1e9, config_));
    return *subscribers_.back();
  }

  scheduling::pump_facts facts_of(shard_slots& slots, subscriber_state& sub) {
    scheduling::pump_facts facts;
    slots.describe(facts, sub, t0);
    return facts;
  }

  scheduler_config config_;
  std::vector<std::unique_ptr<subscriber_state>> subscribers_;
};

TEST_F(ShardSlots, AFreedShardSlotGoesToTheOriginWithFewestInFlightNotTheLongestWaiter) {
  config_.origin.latency_tolerance = 0;  // the origins' limits off: only the shard's cap binds
  shard_slots slots(config_, 2, t0);
  auto& a1 = add(1, "a.test");
  auto& a2 = add(2, "a.test");
  auto& a3 = add(3, "a.test");
  auto& b1 = add(4, "b.test");
  auto& a = slots.origin_of(a1, t0);
  const auto first = slots.start(a1, a, t0);
  slots.start(a2, slots.origin_of(a2, t0), t0);
  EXPECT_TRUE(facts_of(slots, a3).shard_full);
  slots.queue_for_shard(a3, t0);  // waits first
  slots.queue_for_shard(b1, t0);

  std::vector<subscriber_state*> woken;
  slots.end(a, first, t0, woken);
  ASSERT_EQ(woken, std::vector<subscriber_state*>{&b1});  // a.test still has one in flight
  EXPECT_TRUE(b1.slot_turn);
  EXPECT_TRUE(a3.waiting_for_slot);
  // The freed slot is promised to b1: a3's pump, running first, finds the shard full.
  EXPECT_TRUE(facts_of(slots, a3).shard_full);
  EXPECT_FALSE(facts_of(slots, b1).shard_full);
}

TEST_F(ShardSlots, AnOriginAtItsLimitHandsAFreedSlotToItsLongestWaiter) {
  shard_slots slots(config_, 100, t0);
  std::vector<subscriber_state*> subs;
  for (int id = 1; id <= 6; ++id) subs.push_back(&add(id, "partner.test"));
  auto& origin = slots.origin_of(*subs[0], t0);
  std::vector<shard_slots::held> held;
  for (int i = 0; i < config_.origin.initial; ++i) {
    held.push_back(slots.start(*subs[i], slots.origin_of(*subs[i], t0), t0));
  }
  EXPECT_FALSE(facts_of(slots, *subs[4]).origin_admits);
  slots.queue_for_origin(*subs[4], t0);
  slots.queue_for_origin(*subs[5], t0);
  EXPECT_TRUE(facts_of(slots, *subs[5]).origin_has_waiters);

  std::vector<subscriber_state*> woken;
  slots.end(origin, held[0], t0, woken);
  ASSERT_EQ(woken, std::vector<subscriber_state*>{subs[4]});
  EXPECT_TRUE(subs[4]->origin_turn);
  EXPECT_EQ(subs[5]->waiting_on_origin, &origin);
  EXPECT_EQ(origin.in_flight, config_.origin.initial - 1);
  EXPECT_EQ(slots.in_flight(), config_.origin.initial - 1);
}

TEST_F(ShardSlots, ASubscriberThatFoundASlotBeforeItsTurnStopsWaiting) {
  config_.origin.latency_tolerance = 0;
  shard_slots slots(config_, 2, t0);
  auto& a = add(1, "a.test");
  auto& b = add(2, "b.test");
  slots.start(a, slots.origin_of(a, t0), t0);
  slots.queue_for_shard(b, t0);  // queued, say while the shard's limit held it
  EXPECT_TRUE(facts_of(slots, a).shard_has_waiters);
  slots.start(b, slots.origin_of(b, t0), t0);  // a slot was free when its pump looked again
  EXPECT_FALSE(b.waiting_for_slot);
  EXPECT_FALSE(facts_of(slots, a).shard_has_waiters);
  EXPECT_TRUE(facts_of(slots, a).shard_full);
}

TEST_F(ShardSlots, AnOriginsRateIsTheSumOfItsActiveSubscribersAfterARecount) {
  shard_slots slots(config_, 100, t0);
  std::unordered_map<std::int64_t, std::unique_ptr<subscriber_state>> by_id;
  for (int id = 1; id <= 3; ++id) {
    storage::subscriber_row row;
    row.id = id;
    row.url = "http://partner.test/hook";
    row.secret = "secret";
    row.rate_per_sec = 10;
    by_id.emplace(id, std::make_unique<subscriber_state>(row, derive_settings(row, config_), t0,
                                                         1e9, config_));
  }
  by_id.at(3)->settings.active = false;
  slots.recount_rates(by_id, t0);
  EXPECT_DOUBLE_EQ(slots.origin_of(*by_id.at(1), t0).rate_sum, 20);
  std::vector<subscriber_state*> named;
  for (auto& [id, sub] : by_id) named.push_back(sub.get());
  const auto snapshots = slots.snapshots(named, t0);
  ASSERT_EQ(snapshots.size(), 1u);
  EXPECT_EQ(snapshots[0].origin, by_id.at(1)->settings.target->origin_key);
  EXPECT_DOUBLE_EQ(snapshots[0].rate_limit, 20);
  EXPECT_EQ(snapshots[0].subscribers, 2);        // the inactive one is not counted
  EXPECT_TRUE(slots.snapshots({}, t0).empty());  // none sends there, nothing in flight
}

}  // namespace
}  // namespace surge::engine
