#include "proto/ordered_delivery.hpp"

#include <gtest/gtest.h>

namespace surge::proto {
namespace {

struct row {
  std::string key;
  bool due = true;
  bool free = true;
};

// The indices of `rows` (in enqueue order) a claim may lease.
std::vector<std::size_t> heads(const std::vector<row>& rows,
                               const std::set<std::string, std::less<>>& stopped = {}) {
  key_heads rule(stopped);
  std::vector<std::size_t> candidates;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rule.consider(rows[i].key, rows[i].due, rows[i].free)) candidates.push_back(i);
  }
  std::vector<std::size_t> claimable;
  for (const auto i : candidates) {
    if (rule.may_go(rows[i].key)) claimable.push_back(i);
  }
  return claimable;
}

TEST(OrderKey, IsTheJsonTextAtThePointerSoNumbersAndStringsDiffer) {
  EXPECT_EQ(order_key("/video_id", R"({"video_id":7,"rank":1})"), "7");
  EXPECT_EQ(order_key("/video_id", R"({"video_id":"7"})"), "\"7\"");
  EXPECT_EQ(order_key("/a/b", R"({"a":{"b":[1,2]}})"), "[1,2]");
  EXPECT_EQ(order_key("/a~1b", R"({"a/b":true})"), "true");
}

TEST(OrderKey, ALongValueIsNamedByItsDigestAndStillTellsKeysApart) {
  const std::string long_a(500, 'a');
  const auto a = order_key("/k", R"({"k":")" + long_a + R"("})");
  const auto b = order_key("/k", R"({"k":")" + long_a + R"(b"})");
  EXPECT_EQ(a.rfind("sha256:", 0), 0u) << a;
  EXPECT_EQ(a.size(), 7u + 64u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, order_key("/k", R"({"other":1,"k":")" + long_a + R"("})"));
  // A value of 128 bytes of JSON text is kept as it is.
  const std::string fits(126, 'x');
  EXPECT_EQ(order_key("/k", R"({"k":")" + fits + R"("})"), "\"" + fits + "\"");
}

TEST(OrderKey, ADeeplyNestedEventKeepsItsKey) {
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  EXPECT_EQ(order_key("/video_id", R"({"video_id":7,"deep":)" + deep + "}"), "7");
}

TEST(OrderKey, RowsWithoutTheKeyShareTheEmptyKey) {
  EXPECT_EQ(order_key("/video_id", R"({"other":1})"), "");
  EXPECT_EQ(order_key("/video_id", "not json"), "");
  EXPECT_EQ(order_key("/video_id", ""), "");
  // The empty pointer orders the whole subscriber as one key.
  EXPECT_EQ(order_key("", R"({"video_id":7})"), "");
}

TEST(OrderKey, PointersAreCheckedAsRfc6901) {
  EXPECT_EQ(order_pointer_problem(""), "");
  EXPECT_EQ(order_pointer_problem("/video_id"), "");
  EXPECT_NE(order_pointer_problem("video_id"), "");
  EXPECT_NE(order_pointer_problem("/a~2"), "");
  EXPECT_NE(order_pointer_problem("/a~"), "");
}

TEST(KeyHeads, TakesTheFirstRowOfEachKeyOnly) {
  const std::vector<row> rows{{"a"}, {"b"}, {"a"}, {"c"}, {"b"}};
  EXPECT_EQ(heads(rows), (std::vector<std::size_t>{0, 1, 3}));
}

TEST(KeyHeads, AKeyWhoseFirstRowIsInFlightOrWaitingForARetryHoldsOnlyItself) {
  // Row 0 of "a" is leased (in flight): the later rows of "a" wait behind it while "b" goes on.
  const std::vector<row> in_flight{{"a", true, false}, {"b"}, {"a"}, {"a"}, {"b"}};
  EXPECT_EQ(heads(in_flight), (std::vector<std::size_t>{1}));
  // The same when it waits for its retry (not due yet).
  const std::vector<row> retrying{{"a", false, true}, {"b"}, {"a"}};
  EXPECT_EQ(heads(retrying), (std::vector<std::size_t>{1}));
}

TEST(KeyHeads, AFirstRowWaitsWhileALaterRowOfItsKeyIsLeased) {
  // Row 0 became visible (a late commit) or came back (a replay) after row 1 was claimed.
  const std::vector<row> late{{"a"}, {"a", true, false}, {"b"}};
  EXPECT_EQ(heads(late), (std::vector<std::size_t>{2}));
}

TEST(KeyHeads, SaysWhenADueRowWaitsOnlyForARowInFlight) {
  key_heads behind_flight({});
  EXPECT_FALSE(behind_flight.consider("a", true, false));
  EXPECT_FALSE(behind_flight.held_behind_flight());
  EXPECT_FALSE(behind_flight.consider("a", true, true));
  EXPECT_TRUE(behind_flight.held_behind_flight());
  // Behind a retry that is not due, the key waits for the retry's time: nothing to ask soon.
  key_heads behind_retry({});
  EXPECT_FALSE(behind_retry.consider("a", false, true));
  EXPECT_FALSE(behind_retry.consider("a", true, true));
  EXPECT_FALSE(behind_retry.held_behind_flight());
}

TEST(KeyHeads, AStoppedKeyGoesNowhereUntilResumed) {
  const std::vector<row> rows{{"a"}, {"b"}, {"a"}};
  EXPECT_EQ(heads(rows, {"a"}), (std::vector<std::size_t>{1}));
  EXPECT_EQ(heads(rows, {}), (std::vector<std::size_t>{0, 1}));
}

TEST(DeadKey, ParsesOnlyItsTwoNames) {
  dead_key rule = dead_key::moves_on;
  EXPECT_TRUE(parse_dead_key("stop", rule));
  EXPECT_EQ(rule, dead_key::stops);
  EXPECT_FALSE(parse_dead_key("halt", rule));
  EXPECT_EQ(rule, dead_key::stops);
  EXPECT_TRUE(parse_dead_key("skip", rule));
  EXPECT_EQ(rule, dead_key::moves_on);
  EXPECT_EQ(dead_key_name(dead_key::stops), "stop");
  EXPECT_EQ(dead_key_name(dead_key::moves_on), "skip");
}

}  // namespace
}  // namespace surge::proto
