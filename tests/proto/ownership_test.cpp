// Who owns which subscriber among live drainers (proto/ownership.hpp): the assignment every
// drainer computes alike, and one drainer's plan for its own leases.
#include "proto/ownership.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

namespace surge::proto {
namespace {

std::vector<std::int64_t> ids(std::int64_t first, std::int64_t last) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(last - first + 1));
  std::iota(out.begin(), out.end(), first);
  return out;
}

std::vector<live_drainer> drainers(std::initializer_list<const char*> names) {
  std::vector<live_drainer> out;
  for (const auto* name : names) out.push_back({name, {}});
  return out;
}

std::map<std::string, int> loads(const std::vector<std::string>& owners) {
  std::map<std::string, int> out;
  for (const auto& owner : owners) ++out[owner];
  return out;
}

TEST(Ownership, SubscribersAreSpreadEvenlyOverLiveDrainers) {
  for (const std::int64_t count : {1, 2, 3, 10, 11, 100, 301}) {
    const auto subscribers = ids(1, count);
    const auto live = drainers({"surge@a:1", "surge@b:2", "surge@c:3"});
    const auto owners = assign_owners(subscribers, live);
    ASSERT_EQ(owners.size(), subscribers.size());
    const auto per = loads(owners);
    EXPECT_FALSE(per.contains("")) << count;
    int low = INT32_MAX;
    int high = 0;
    for (const auto& d : live) {
      const int n = per.contains(d.name) ? per.at(d.name) : 0;
      low = std::min(low, n);
      high = std::max(high, n);
    }
    EXPECT_LE(high - low, 1) << count << " subscribers";
  }
}

TEST(Ownership, EveryDrainerComputesTheSameAssignmentWhateverTheOrderItReadsDrainersIn) {
  const auto subscribers = ids(1, 50);
  auto live = drainers({"surge@a:1", "surge@b:2", "surge@c:3"});
  const auto first = assign_owners(subscribers, live);
  std::reverse(live.begin(), live.end());
  EXPECT_EQ(assign_owners(subscribers, live), first);
}

TEST(Ownership, AJoiningDrainerMovesAboutItsShareNotEverything) {
  const auto subscribers = ids(1, 300);
  const auto before = assign_owners(subscribers, drainers({"surge@a:1", "surge@b:2"}));
  const auto after = assign_owners(subscribers, drainers({"surge@a:1", "surge@b:2", "surge@c:3"}));
  int moved = 0;
  for (std::size_t i = 0; i < subscribers.size(); ++i) moved += before[i] != after[i];
  EXPECT_EQ(loads(after)["surge@c:3"], 100);
  // The newcomer's 100 must move; the even-share cap moves a few more, not half of them all.
  EXPECT_GE(moved, 100);
  EXPECT_LE(moved, 140) << moved;
}

TEST(Ownership, ALeavingDrainerOnlyMovesItsOwnSubscribersWhenSharesAllowIt) {
  const auto subscribers = ids(1, 300);
  const auto before = assign_owners(subscribers, drainers({"surge@a:1", "surge@b:2", "surge@c:3"}));
  const auto after = assign_owners(subscribers, drainers({"surge@a:1", "surge@b:2"}));
  int kept = 0;
  for (std::size_t i = 0; i < subscribers.size(); ++i) {
    if (before[i] != "surge@c:3") kept += before[i] == after[i];
  }
  EXPECT_GE(kept, 170) << "of the 200 subscribers the survivors owned";
  EXPECT_EQ(loads(after)["surge@a:1"], 150);
  EXPECT_EQ(loads(after)["surge@b:2"], 150);
}

TEST(Ownership, ASubscribersSelectionIsHonoured) {
  const auto subscribers = ids(1, 20);
  std::vector<live_drainer> live = {{"surge@a:1", *id_set::parse("1-5")},
                                    {"surge@b:2", *id_set::parse("1-15")}};
  const auto owners = assign_owners(subscribers, live);
  for (std::size_t i = 0; i < subscribers.size(); ++i) {
    if (owners[i] == "surge@a:1") {
      EXPECT_LE(subscribers[i], 5);
    }
    if (subscribers[i] > 5 && subscribers[i] <= 15) {
      EXPECT_EQ(owners[i], "surge@b:2");
    }
    // No live drainer may take 16-20: nobody owns them.
    if (subscribers[i] > 15) {
      EXPECT_EQ(owners[i], "");
    }
  }
  EXPECT_GE(loads(owners)["surge@a:1"], 1);
}

TEST(Ownership, ANewDrainerTakesOnlyWhatTheOwnerReleased) {
  const auto subscribers = ids(1, 10);
  const auto live = drainers({"surge@a:1", "surge@b:2"});
  std::vector<subscriber_owner> owners;
  for (const auto id : subscribers) owners.push_back({id, "surge@a:1", 104});
  const double now = 100;

  // B joined: A still owns everything live, so B takes nothing yet.
  const auto b_first = plan_ownership("surge@b:2", subscribers, live, owners, now);
  EXPECT_TRUE(b_first.take.empty());
  EXPECT_TRUE(b_first.keep.empty());
  EXPECT_EQ(b_first.awaited.size(), 5u);  // its share, still A's: it renews again soon

  // A keeps its share and releases B's.
  const auto a_plan = plan_ownership("surge@a:1", subscribers, live, owners, now);
  EXPECT_EQ(a_plan.keep.size(), 5u);
  EXPECT_EQ(a_plan.release.size(), 5u);
  EXPECT_TRUE(a_plan.take.empty());

  // Once released, B takes exactly those.
  std::erase_if(owners, [&](const subscriber_owner& o) {
    return std::find(a_plan.release.begin(), a_plan.release.end(), o.subscriber_id) !=
           a_plan.release.end();
  });
  const auto b_second = plan_ownership("surge@b:2", subscribers, live, owners, now);
  EXPECT_EQ(b_second.take, a_plan.release);
  EXPECT_TRUE(b_second.awaited.empty());
}

TEST(Ownership, ADeadDrainersSubscribersAreTakenOnceItsHeartbeatExpires) {
  const auto subscribers = ids(1, 9);
  std::vector<subscriber_owner> owners;
  for (const auto id : subscribers) {
    owners.push_back({id, id % 3 == 0 ? "surge@dead:9" : (id % 3 == 1 ? "surge@a:1" : "surge@b:2"),
                      id % 3 == 0 ? 99.0 : 104.0});
  }
  const auto live = drainers({"surge@a:1", "surge@b:2"});
  std::set<std::int64_t> taken;
  for (const char* self : {"surge@a:1", "surge@b:2"}) {
    const auto plan = plan_ownership(self, subscribers, live, owners, 100);
    for (const auto id : plan.take) {
      EXPECT_EQ(id % 3, 0) << self << " took a live owner's subscriber " << id;
      EXPECT_TRUE(taken.insert(id).second) << id << " taken twice";
    }
  }
  // Before the heartbeat expires nothing is taken.
  for (const char* self : {"surge@a:1", "surge@b:2"}) {
    std::vector<subscriber_owner> alive = owners;
    for (auto& o : alive) o.expires_at = 104;
    EXPECT_TRUE(plan_ownership(self, subscribers, live, alive, 100).take.empty());
  }
  // Over the next renewals (releases, then takes) the survivors converge on all nine.
  EXPECT_FALSE(taken.empty());
}

TEST(Ownership, FromAnEmptyTableTheDrainersTakeDisjointSetsThatCoverEverything) {
  const auto subscribers = ids(1, 37);
  const auto live = drainers({"surge@a:1", "surge@b:2", "surge@c:3"});
  std::set<std::int64_t> all;
  for (const auto& d : live) {
    const auto plan = plan_ownership(d.name, subscribers, live, {}, 100);
    EXPECT_TRUE(plan.release.empty());
    for (const auto id : plan.take) EXPECT_TRUE(all.insert(id).second) << id;
  }
  EXPECT_EQ(all.size(), subscribers.size());
}

TEST(Ownership, AnOwnedSubscriberThatIsGoneIsReleased) {
  const std::vector<std::int64_t> subscribers = {1, 2};
  const std::vector<subscriber_owner> owners = {{1, "surge@a:1", 104}, {7, "surge@a:1", 104}};
  const auto plan = plan_ownership("surge@a:1", subscribers, drainers({"surge@a:1"}), owners, 100);
  EXPECT_EQ(plan.keep, std::vector<std::int64_t>{1});
  EXPECT_EQ(plan.take, std::vector<std::int64_t>{2});
  EXPECT_EQ(plan.release, std::vector<std::int64_t>{7});
}

}  // namespace
}  // namespace surge::proto

namespace surge::proto {
namespace {

TEST(Ownership, OnlyAnUnchangedViewWithALiveHeartbeatSkipsTheFullRenewal) {
  const renewal_view seen{.live = {{"surge@a:1", {}}, {"surge@b:1", *id_set::parse("1-10")}},
                          .subscriber_count = 20,
                          .highest_subscriber_id = 20,
                          .owned_by_self = 10};
  const full_renewal last{.view = seen, .at = 1000, .awaiting = false, .owned_after = 10};
  EXPECT_TRUE(heartbeat_is_enough(last, seen, 1001, 1004, 30));
  EXPECT_FALSE(heartbeat_is_enough(std::nullopt, seen, 1001, 1004, 30)) << "never read everything";
  EXPECT_FALSE(heartbeat_is_enough(last, seen, 1004, 1004, 30)) << "the heartbeat lapsed";
  EXPECT_FALSE(heartbeat_is_enough(last, seen, 1030, 1031, 30)) << "the periodic full look";
  auto awaiting = last;
  awaiting.awaiting = true;
  EXPECT_FALSE(heartbeat_is_enough(awaiting, seen, 1001, 1004, 30));
  auto added = seen;
  added.highest_subscriber_id = 21;
  added.subscriber_count = 21;
  EXPECT_FALSE(heartbeat_is_enough(last, added, 1001, 1004, 30));
  auto replaced = seen;
  replaced.highest_subscriber_id = 21;  // one deleted, one added: same count
  EXPECT_FALSE(heartbeat_is_enough(last, replaced, 1001, 1004, 30));
  auto joined = seen;
  joined.live.push_back({"surge@c:1", {}});
  EXPECT_FALSE(heartbeat_is_enough(last, joined, 1001, 1004, 30));
  auto reselected = seen;
  reselected.live[1].subscribers = *id_set::parse("1-11");
  EXPECT_FALSE(heartbeat_is_enough(last, reselected, 1001, 1004, 30));
  auto taken = seen;
  taken.owned_by_self = last.owned_after - 1;  // another drainer judged our heartbeat expired
  EXPECT_FALSE(heartbeat_is_enough(last, taken, 1001, 1004, 30));
}

}  // namespace
}  // namespace surge::proto
