// This drain's ownership between renewals (engine/storage_thread/ownership_round.hpp): the first
// renewal tells the shards of nothing taken, later ones do; released and lost subscribers are
// told as disowned; ownership is released once.
#include "engine/storage_thread/ownership_round.hpp"

#include <gtest/gtest.h>

namespace surge::engine {
namespace {

using ids = std::vector<std::int64_t>;

TEST(OwnershipRound, TheFirstRenewalTellsNothingTakenForTheBucketsWereJustSeeded) {
  ownership_round round;
  round.renewing(true);
  auto tell = round.renewed({.taken = {1, 2}, .released = {}, .lost = {}, .awaited = 0});
  EXPECT_TRUE(tell.empty());
  round.renewing(false);
  tell = round.renewed({.taken = {3}, .released = {}, .lost = {}, .awaited = 0});
  ASSERT_EQ(tell.size(), 1U);
  EXPECT_TRUE(tell[0].taken);
  EXPECT_EQ(tell[0].subscribers, ids{3});
}

TEST(OwnershipRound, OnlyTheFirstRenewalsAnswerTellsNothingTaken) {
  ownership_round round;
  round.renewing(true);
  EXPECT_TRUE(round.renewed({.taken = {1}, .released = {}, .lost = {}, .awaited = 0}).empty());
  // The next answer, even with no renewing(false) in between, tells what it took.
  EXPECT_EQ(round.renewed({.taken = {2}, .released = {}, .lost = {}, .awaited = 0}).size(), 1U);
}

TEST(OwnershipRound, AFailedFirstRenewalLeavesTheNextOneToTellWhatItTook) {
  ownership_round round;
  round.renewing(true);  // its answer never comes: the renewal failed
  round.renewing(false);
  const auto tell = round.renewed({.taken = {7}, .released = {}, .lost = {}, .awaited = 0});
  ASSERT_EQ(tell.size(), 1U);
  EXPECT_TRUE(tell[0].taken);
}

TEST(OwnershipRound, ReleasedAndLostAreToldAsDisownedEvenOnTheFirstRenewal) {
  ownership_round round;
  round.renewing(true);
  const auto tell = round.renewed({.taken = {1}, .released = {4}, .lost = {5, 6}, .awaited = 0});
  ASSERT_EQ(tell.size(), 1U);
  EXPECT_FALSE(tell[0].taken);
  EXPECT_EQ(tell[0].subscribers, (ids{4, 5, 6}));
}

TEST(OwnershipRound, OwnershipIsReleasedOnce) {
  ownership_round round;
  EXPECT_TRUE(round.release());
  EXPECT_FALSE(round.release());
  EXPECT_FALSE(round.release());
}

}  // namespace
}  // namespace surge::engine
