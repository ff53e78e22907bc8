// How many rows one claim may ask for after statement timeouts
// (engine/storage_thread/claim_size.hpp).
#include "engine/storage_thread/claim_size.hpp"

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace surge::engine {
namespace {

std::vector<storage::subscriber_demand> demand(std::vector<int> rows) {
  std::vector<storage::subscriber_demand> out;
  std::int64_t subscriber = 1;
  for (const int n : rows) out.push_back({.subscriber_id = subscriber++, .rows = n});
  return out;
}

TEST(ClaimSize, NothingIsCappedUntilAClaimTimesOut) {
  const claim_size size;
  EXPECT_FALSE(size.capped());
  auto asked = demand({5000, 7});
  size.cap(asked);
  EXPECT_EQ(asked[0].rows, 5000);
  EXPECT_EQ(asked[1].rows, 7);
}

TEST(ClaimSize, ATimeoutHalvesWhatWasAskedDownToOneRow) {
  claim_size size;
  size.timed_out(demand({60, 40}));
  EXPECT_EQ(size.most_rows(), 50U);
  // A smaller claim that times out again halves the smaller of the two.
  size.timed_out(demand({30}));
  EXPECT_EQ(size.most_rows(), 15U);
  size.timed_out(demand({100}));
  EXPECT_EQ(size.most_rows(), 7U);
  for (int i = 0; i < 5; ++i) size.timed_out(demand({100}));
  EXPECT_EQ(size.most_rows(), 1U);
  // An empty demand still leaves one row to ask for.
  size.timed_out(demand({}));
  EXPECT_EQ(size.most_rows(), 1U);
}

TEST(ClaimSize, TheCapIsSharedOutInTheOrderAsked) {
  claim_size size;
  size.timed_out(demand({20}));
  auto asked = demand({4, 8, 3, -2});
  size.cap(asked);
  EXPECT_EQ(asked[0].rows, 4);
  EXPECT_EQ(asked[1].rows, 6);
  EXPECT_EQ(asked[2].rows, 0);
  EXPECT_EQ(asked[3].rows, 0);
}

TEST(ClaimSize, ClaimsThatFitGrowBackUntilUncapped) {
  claim_size size;
  size.timed_out(demand({2}));
  EXPECT_EQ(size.most_rows(), 1U);
  size.fitted();
  EXPECT_EQ(size.most_rows(), 2U);
  size.fitted();
  EXPECT_EQ(size.most_rows(), 4U);
  int fits = 2;
  for (; size.capped() && fits < 64; ++fits) size.fitted();
  // 2^20 rows is reached after 20 doublings; the next fit lifts the cap.
  EXPECT_EQ(fits, 21);
  size.fitted();
  EXPECT_FALSE(size.capped());
}

}  // namespace
}  // namespace surge::engine
