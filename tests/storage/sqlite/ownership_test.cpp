// Ownership leases on a real queue file (storage/ownership.hpp): drainers on their own
// connections spread the subscribers, hand them over, take over a dead drainer's, and fence
// claims to what they own.
#include "proto/clock.hpp"
#include "storage/sqlite/ownership.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include <sys/wait.h>
#include <unistd.h>

#include "storage/sqlite/claims.hpp"
#include "storage/sqlite/cycle.hpp"
#include "storage/sqlite/database.hpp"
#include "tests/storage/test_db.hpp"

namespace surge::storage::sqlite {
namespace {

constexpr double heartbeat = 4;

class Ownership : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 12; ++i) subscribers_.push_back(testing::insert_subscriber_old(db_));
  }
  // a takes everything, b joins, a releases b's half and b takes it: 6 each by t = 1001.1.
  static void settle_halves(ownership_keeper& a, ownership_keeper& b) {
    a.renew(1000);
    b.renew(1000.1);
    a.renew(1001);
    b.renew(1001.1);
  }
  // What each keeper owns at `now`.
  static std::set<std::int64_t> owned(const ownership_keeper& keeper,
                                      const std::vector<std::int64_t>& ids, double now) {
    std::set<std::int64_t> out;
    for (const auto id : ids) {
      if (keeper.owns(id, now)) out.insert(id);
    }
    return out;
  }
  testing::temp_dir dir_;
  std::string path_ = dir_.file("queue.db");
  SQLite::Database db_ = testing::open_migrated(path_);
  SQLite::Database other_ = testing::open_migrated(path_);
  SQLite::Database third_ = testing::open_migrated(path_);
  std::vector<std::int64_t> subscribers_;
};

TEST_F(Ownership, ADrainAloneOwnsEverySubscriberAtItsFirstRenewal) {
  ownership_keeper a(db_, "surge@a:1", {}, heartbeat);
  const auto change = a.renew(1000);
  EXPECT_EQ(change.taken.size(), subscribers_.size());
  EXPECT_EQ(owned(a, subscribers_, 1000).size(), subscribers_.size());
  EXPECT_EQ(a.owned_count(1000), subscribers_.size());
  // The fence: nothing is owned once the heartbeat runs out without a renewal.
  EXPECT_TRUE(owned(a, subscribers_, 1000 + heartbeat).empty());
}

TEST_F(Ownership, ASecondDrainGetsHalfAfterTheFirstReleasesItAndNeitherOwnsOneTwice) {
  ownership_keeper a(db_, "surge@a:1", {}, heartbeat);
  ownership_keeper b(other_, "surge@b:2", {}, heartbeat);
  a.renew(1000);
  const auto joined = b.renew(1000.1);
  EXPECT_TRUE(joined.taken.empty());  // all owned by a live drainer
  EXPECT_EQ(joined.awaited, subscribers_.size() / 2);
  const auto released = a.renew(1001).released;
  EXPECT_EQ(released.size(), subscribers_.size() / 2);
  const auto taken = b.renew(1001.1).taken;
  EXPECT_EQ(taken, released);
  const auto mine = owned(a, subscribers_, 1001.2);
  const auto theirs = owned(b, subscribers_, 1001.2);
  EXPECT_EQ(mine.size(), 6u);
  EXPECT_EQ(theirs.size(), 6u);
  for (const auto id : mine) EXPECT_FALSE(theirs.contains(id)) << id;

  const auto table = read_ownership(db_, 1001.2);
  ASSERT_EQ(table.size(), 2u);
  EXPECT_EQ(table[0].name, "surge@a:1");
  EXPECT_EQ(table[0].allowed, "*");
  EXPECT_EQ(std::set<std::int64_t>(table[0].subscribers.begin(), table[0].subscribers.end()), mine);
  EXPECT_EQ(std::set<std::int64_t>(table[1].subscribers.begin(), table[1].subscribers.end()),
            theirs);
}

TEST_F(Ownership, ADeadDrainsSubscribersAreTakenOverOnceItsHeartbeatExpires) {
  ownership_keeper a(db_, "surge@a:1", {}, heartbeat);
  ownership_keeper b(other_, "surge@b:2", {}, heartbeat);
  ownership_keeper c(third_, "surge@c:3", {}, heartbeat);
  double now = 1000;
  for (int round = 0; round < 3; ++round, now += 1) {
    a.renew(now);
    b.renew(now + 0.1);
    c.renew(now + 0.2);
  }
  const auto c_had = owned(c, subscribers_, now);
  ASSERT_EQ(c_had.size(), 4u);
  // c dies (no more renewals). Within its heartbeat nobody takes its subscribers.
  const double died = now - 1 + 0.2;
  for (; now < died + heartbeat; now += 1) {
    EXPECT_TRUE(a.renew(now).taken.empty()) << now;
    EXPECT_TRUE(b.renew(now + 0.1).taken.empty()) << now;
  }
  // Then the survivors take all of them within two renewals, and nobody takes one twice.
  std::set<std::int64_t> taken;
  for (int round = 0; round < 2; ++round, now += 1) {
    for (auto* keeper : {&a, &b}) {
      for (const auto id : keeper->renew(now).taken) EXPECT_TRUE(taken.insert(id).second) << id;
    }
  }
  // A survivor may also hand one of its own to the other as the shares change from 4 to 6.
  for (const auto id : c_had) EXPECT_TRUE(taken.contains(id)) << id;
  EXPECT_EQ(owned(a, subscribers_, now).size() + owned(b, subscribers_, now).size(),
            subscribers_.size());
}

TEST_F(Ownership, ADrainThatMissedItsRenewalsLearnsItWasTakenOver) {
  ownership_keeper a(db_, "surge@a:1", {}, heartbeat);
  ownership_keeper b(other_, "surge@b:2", {}, heartbeat);
  settle_halves(a, b);
  const auto a_had = owned(a, subscribers_, 1001.2);
  // a stalls for longer than its heartbeat; b takes everything.
  b.renew(1006);
  b.renew(1007);
  EXPECT_EQ(owned(b, subscribers_, 1007).size(), subscribers_.size());
  // a's claims were fenced from the moment its heartbeat ran out; when it renews again it
  // learns what it lost, and takes nothing a live drainer owns.
  EXPECT_TRUE(owned(a, subscribers_, 1007).empty());
  const auto back = a.renew(1007.5);
  std::set<std::int64_t> lost(back.lost.begin(), back.lost.end());
  EXPECT_EQ(lost, a_had);
  EXPECT_TRUE(back.taken.empty());
  EXPECT_TRUE(owned(a, subscribers_, 1007.5).empty());
}

TEST_F(Ownership, ADrainOnThisHostWhoseProcessIsGoneIsTakenOverAtOnce) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // reaped: the pid names no process now
  const auto self = default_lease_owner();
  const auto dead_name = self.substr(0, self.rfind(':') + 1) + std::to_string(child);
  const double now = proto::unix_now();
  ownership_keeper dead(other_, dead_name, {}, heartbeat);
  ASSERT_EQ(dead.renew(now).taken.size(), subscribers_.size());
  ownership_keeper alive(db_, self, {}, heartbeat);
  // Well within the dead drain's heartbeat, yet everything is taken at the first renewal.
  EXPECT_EQ(alive.renew(now + 0.5).taken.size(), subscribers_.size());
  const auto table = read_ownership(db_, now + 0.5);
  ASSERT_EQ(table.size(), 1u);
  EXPECT_EQ(table.front().name, self);

  // A live drain of this host (this very process, under another name's pid) is left alone.
  ownership_keeper neighbour(
      third_, self.substr(0, self.rfind(':') + 1) + std::to_string(::getppid()), {}, heartbeat);
  neighbour.renew(now + 0.6);
  alive.renew(now + 0.7);
  EXPECT_EQ(read_ownership(db_, now + 0.7).size(), 2u);
}

TEST_F(Ownership, AHeartbeatNoRenewalCouldHaveWrittenHoldsNothing) {
  ownership_keeper a(db_, "surge@a:1", {}, heartbeat);
  ownership_keeper c(third_, "surge@c:3", {}, heartbeat);
  // Another program stretches a's heartbeat a day ahead, or makes it text.
  for (const char* bogus : {"1000 + 86400", "'soon'"}) {
    ASSERT_EQ(a.renew(1000).taken.size(), subscribers_.size()) << bogus;
    db_.exec(std::string("UPDATE surge_drainer SET expires_at = ") + bogus +
             " WHERE name = 'surge@a:1'");
    EXPECT_EQ(c.renew(1001).taken.size(), subscribers_.size()) << bogus;
    // `surge stats` agrees: only c is live.
    const auto table = read_ownership(db_, 1001);
    ASSERT_EQ(table.size(), 1u) << bogus;
    EXPECT_EQ(table.front().name, "surge@c:3");
    c.release_all();
  }
}

TEST_F(Ownership, AStoppingDrainReleasesEverythingAndTheOtherTakesItAtOnce) {
  ownership_keeper a(db_, "surge@a:1", {}, heartbeat);
  ownership_keeper b(other_, "surge@b:2", {}, heartbeat);
  settle_halves(a, b);
  a.release_all();
  EXPECT_TRUE(owned(a, subscribers_, 1001.2).empty());
  EXPECT_EQ(b.renew(1001.3).taken.size(), 6u);
  EXPECT_EQ(owned(b, subscribers_, 1001.3).size(), subscribers_.size());
  EXPECT_EQ(read_ownership(db_, 1001.3).size(), 1u);
}

TEST_F(Ownership, ASubscribersSelectionLimitsWhatADrainTakes) {
  const auto first = subscribers_.front();
  ownership_keeper a(db_, "surge@a:1", *proto::id_set::parse(std::to_string(first)), heartbeat);
  a.renew(1000);
  EXPECT_EQ(owned(a, subscribers_, 1000), std::set<std::int64_t>{first});
  EXPECT_EQ(read_ownership(db_, 1000).front().allowed, std::to_string(first));
}

TEST_F(Ownership, TheCycleClaimsAndLeasesTokensOnlyForOwnedSubscribers) {
  const double now = proto::unix_now();
  for (const auto id : subscribers_) testing::insert_deliveries_old(db_, id, 2, now - 1);
  ownership_keeper a(db_, "surge@a:1", {}, 30);
  ownership_keeper b(other_, "surge@b:2", {}, 30);
  a.renew(now);
  b.renew(now);
  a.renew(now);
  b.renew(now);
  claimer claims(db_);
  outcome_writer writer(db_);
  token_leaser tokens(db_, 0);
  std::vector<subscriber_demand> demand;
  for (const auto id : subscribers_)
    demand.push_back({.subscriber_id = id, .rows = 5, .tokens = 2});
  const auto result = write_and_claim(db_, writer, claims, tokens, {}, {}, demand, now, 30,
                                      claimer::no_payload_cap, &a);
  std::set<std::int64_t> claimed_for;
  for (const auto& row : result.claimed) claimed_for.insert(row.subscriber_id);
  EXPECT_EQ(claimed_for, owned(a, subscribers_, now));
  EXPECT_EQ(result.claimed.size(), 2 * claimed_for.size());
  ASSERT_EQ(result.granted.size(), subscribers_.size());
  for (const auto& grant : result.granted) {
    if (a.owns(grant.subscriber_id, now)) {
      EXPECT_EQ(grant.tokens, 2) << grant.subscriber_id;
    } else {
      // Answered with nothing, and told to ask again about a renewal later.
      EXPECT_EQ(grant.tokens, 0) << grant.subscriber_id;
      EXPECT_GT(grant.next_token_at, now);
    }
  }
}

}  // namespace
}  // namespace surge::storage::sqlite

namespace surge::storage::sqlite {
namespace {

TEST_F(Ownership, ARenewalReadsEverythingOnlyWhenThePlanMayHaveChanged) {
  ownership_keeper a(db_, "surge@a:1", {}, heartbeat);
  ownership_keeper b(other_, "surge@b:1", {}, heartbeat);
  settle_halves(a, b);
  const auto full_a = a.full_renewals();
  // Nothing changed: the next renewals only extend the heartbeat and keep what a owns.
  for (double t = 1002; t < 1010; t += 1) {
    const auto change = a.renew(t);
    EXPECT_TRUE(change.taken.empty() && change.released.empty() && change.lost.empty());
    b.renew(t + 0.1);
  }
  EXPECT_EQ(a.full_renewals(), full_a);
  EXPECT_EQ(a.owned_count(1009.5), 6u);
  EXPECT_FALSE(owned(a, subscribers_, 1012.5).empty()) << "the heartbeat was extended";

  // A new subscriber changes the fingerprint: both look again and one of them takes it.
  const auto added = testing::insert_subscriber_old(db_);
  a.renew(1010);
  b.renew(1010.1);
  EXPECT_EQ(a.full_renewals(), full_a + 1);
  EXPECT_TRUE(a.owns(added, 1010.2) != b.owns(added, 1010.2));

  // A drainer that joins changes the live set; a heartbeat that lapsed forces a full look too.
  ownership_keeper c(third_, "surge@c:1", {}, heartbeat);
  c.renew(1011);
  a.renew(1011.1);
  EXPECT_EQ(a.full_renewals(), full_a + 2);
  a.renew(1011.2);  // awaiting nothing, nothing changed: heartbeat only
  EXPECT_EQ(a.full_renewals(), full_a + 2);
  a.renew(1011.2 + heartbeat + 0.1);
  EXPECT_EQ(a.full_renewals(), full_a + 3);
}

}  // namespace
}  // namespace surge::storage::sqlite
