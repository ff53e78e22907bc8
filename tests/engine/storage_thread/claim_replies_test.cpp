// One claim's answer split by the shards that asked (engine/storage_thread/claim_replies.hpp).
#include "engine/storage_thread/claim_replies.hpp"

#include <gtest/gtest.h>

#include "engine/handoff.hpp"

namespace surge::engine {
namespace {

storage::claimed_row row_of(std::int64_t subscriber, std::int64_t id) {
  storage::claimed_row row;
  row.id = id;
  row.subscriber_id = subscriber;
  return row;
}

TEST(ClaimReplies, EachShardThatAskedGetsItsDemandBackWithItsSubscribersRowsGrantsAndMoreDue) {
  const std::size_t shards = 2;
  // Subscribers of each shard, found by the rule the drain routes by.
  std::int64_t of_first = 1;
  while (shard_of(of_first, shards) != 0) ++of_first;
  std::int64_t of_second = 1;
  while (shard_of(of_second, shards) != 1) ++of_second;

  std::vector<std::pair<int, std::vector<storage::subscriber_demand>>> asked;
  asked.push_back({1, {{.subscriber_id = of_second, .rows = 2}}});
  asked.push_back({0, {{.subscriber_id = of_first, .rows = 1}}});
  const auto answers = claim_replies(
      std::move(asked), {row_of(of_second, 10), row_of(of_first, 11), row_of(of_second, 12)},
      {{.subscriber_id = of_first, .tokens = 3}}, {of_second}, shards);

  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0].shard, 1);  // in the order they asked
  EXPECT_EQ(answers[0].reply.asked.at(0).subscriber_id, of_second);
  ASSERT_EQ(answers[0].reply.rows.size(), 2u);
  EXPECT_EQ(answers[0].reply.rows[0].id, 10);
  EXPECT_EQ(answers[0].reply.rows[1].id, 12);
  EXPECT_TRUE(answers[0].reply.granted.empty());
  EXPECT_EQ(answers[0].reply.more_due, std::vector<std::int64_t>{of_second});
  EXPECT_EQ(answers[1].shard, 0);
  ASSERT_EQ(answers[1].reply.rows.size(), 1u);
  EXPECT_EQ(answers[1].reply.rows[0].id, 11);
  ASSERT_EQ(answers[1].reply.granted.size(), 1u);
  EXPECT_EQ(answers[1].reply.granted[0].subscriber_id, of_first);
  EXPECT_TRUE(answers[1].reply.more_due.empty());
}

TEST(ClaimReplies, NoShardAskedNoAnswer) { EXPECT_TRUE(claim_replies({}, {}, {}, {}, 4).empty()); }

}  // namespace
}  // namespace surge::engine
