// A shard's part of --max-payload-memory (engine/limits/payload_memory) on its own: how many rows
// each subscriber may ask for, at its own rows' weight. The shard core's use of it, with requests
// that hang, is tests/engine/shard/payload_memory_test.cpp.
#include "engine/limits/payload_memory.hpp"

#include <gtest/gtest.h>

namespace surge::engine {
namespace {

constexpr double share = 1'000'000;
constexpr std::size_t largest_row = 1'000'000;

TEST(PayloadShare, OneRowAlwaysFitsWhenTheShardHoldsNothing) {
  payload_memory memory(1000, largest_row);  // a share smaller than one row
  subscriber_payload sub;
  EXPECT_EQ(memory.rows_within(sub, memory.free_bytes()), 1) << "the drain never stalls";
  subscriber_payload other;
  memory.take_row(other, 500);
  EXPECT_EQ(memory.rows_within(sub, memory.free_bytes()), 0)
      << "a row counted at the largest size is past the share and the floor";
}

TEST(PayloadShare, SubscribersHoldingMoreThanTheFloorShareWhatIsLeftEvenly) {
  payload_memory memory(share, largest_row);
  subscriber_payload hanging_a, hanging_b, light;
  for (int i = 0; i < 3; ++i) {
    memory.take_row(hanging_a, 100'000);
    memory.take_row(hanging_b, 100'000);
  }
  memory.answered(6, 600'000);
  EXPECT_DOUBLE_EQ(memory.free_bytes(), 400'000);
  // Each heavy one may reach half of the share: 500,000 less the 300,000 it holds.
  EXPECT_EQ(memory.rows_within(hanging_a, memory.free_bytes()), 2);
  // One not yet heavy counts itself in: a third of the share, at the shard's estimate per row.
  EXPECT_EQ(memory.rows_within(light, memory.free_bytes()), 3);
}

TEST(PayloadShare, EachSubscribersRowsAreWeighedOnTheirOwn) {
  payload_memory memory(share, largest_row);
  subscriber_payload large, small, unseen;
  memory.take_row(large, 200'000);
  memory.take_row(small, 1'000);
  memory.answered(2, 201'000);
  EXPECT_DOUBLE_EQ(memory.row_weight(large), 200'000);
  EXPECT_DOUBLE_EQ(memory.row_weight(small), 1'000);
  EXPECT_DOUBLE_EQ(memory.row_weight(unseen), 100'500) << "the shard's estimate from the answer";
  memory.take_row(small, 5'000);
  EXPECT_DOUBLE_EQ(memory.row_weight(small), 2'000) << "moved a quarter of the way";
}

TEST(PayloadShare, RowsAskedForCountUntilTheirAnswerComes) {
  payload_memory memory(share, largest_row);
  subscriber_payload sub;
  memory.take_row(sub, 100'000);
  memory.asked(sub, 4);
  EXPECT_DOUBLE_EQ(memory.free_bytes(), 500'000);
  memory.asked_answered(sub);
  EXPECT_DOUBLE_EQ(memory.free_bytes(), 900'000);
  memory.hold(sub, -100'000);  // the row was sent and done
  EXPECT_DOUBLE_EQ(memory.free_bytes(), share);
  EXPECT_EQ(memory.held_bytes(), 0);
}

}  // namespace
}  // namespace surge::engine
