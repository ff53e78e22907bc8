// proto/coalesce: which rows merge. Merging wrongly loses an event a receiver
// needed, so the tests aim at the edges: what makes two keys equal, and where a window ends.
#include "proto/coalesce.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace surge::proto {
namespace {

TEST(coalesce, pointer_problem) {
  EXPECT_EQ(coalesce_pointer_problem("/data/video_id"), "");
  EXPECT_EQ(coalesce_pointer_problem("/id"), "");
  EXPECT_EQ(coalesce_pointer_problem("/"), "");  // the member named "" is a valid pointer
  EXPECT_EQ(coalesce_pointer_problem("/a~0b/c~1d"), "");
  EXPECT_EQ(coalesce_pointer_problem("/~0~1"), "");

  EXPECT_NE(coalesce_pointer_problem("data/video_id").find("must start with '/'"),
            std::string::npos);
  EXPECT_NE(coalesce_pointer_problem(""), "");  // would make the whole payload the key
  for (const char* bad : {"/a~2", "/a~", "/~/b", "/a~x"}) {
    EXPECT_NE(coalesce_pointer_problem(bad).find('~'), std::string::npos) << bad;
  }
}

coalesce_rule rule(std::string pointer, std::string events = "*") {
  return {.pointer = std::move(pointer), .window_seconds = 10, .event_types = std::move(events)};
}

TEST(coalesce, key_is_nullopt_when_the_rule_does_not_apply) {
  const auto r = rule("/data/video_id", "video.rank_updated");
  const std::string payload = R"({"data":{"video_id":"v1"}})";
  EXPECT_TRUE(coalesce_key(r, "video.rank_updated", payload));
  EXPECT_FALSE(coalesce_key(r, "video.trending", payload));  // type outside the rule
  EXPECT_FALSE(coalesce_key(r, "video.rank_updated", "not json"));
  EXPECT_FALSE(coalesce_key(r, "video.rank_updated", R"({"data":{"video_id":"v1"})"));
  EXPECT_FALSE(coalesce_key(r, "video.rank_updated", R"({"data":{}})"));  // pointer missing
  EXPECT_FALSE(coalesce_key(r, "video.rank_updated", R"({"video_id":"v1"})"));
  EXPECT_FALSE(coalesce_key(r, "video.rank_updated", R"({"data":"v1"})"));  // not an object
  // Prefix patterns follow the --events syntax.
  EXPECT_TRUE(coalesce_key(rule("/data/video_id", "video.*"), "video.trending", payload));
  EXPECT_FALSE(coalesce_key(rule("/data/video_id", "video.*"), "user.created", payload));
}

TEST(coalesce, same_value_same_type_is_one_key_whatever_else_differs) {
  const auto r = rule("/data/video_id");
  const auto a = coalesce_key(r, "video.rank_updated", R"({"data":{"video_id":"v1","rank":3}})");
  const auto b =
      coalesce_key(r, "video.rank_updated", R"({ "data" : { "rank" : 9, "video_id" : "v1" } })");
  ASSERT_TRUE(a);
  ASSERT_TRUE(b);
  EXPECT_EQ(*a, *b);
  const auto other = coalesce_key(r, "video.rank_updated", R"({"data":{"video_id":"v2"}})");
  ASSERT_TRUE(other);
  EXPECT_NE(*a, *other);
}

TEST(coalesce, different_types_never_share_a_key) {
  const auto r = rule("/data/video_id");
  const std::string payload = R"({"data":{"video_id":"v1"}})";
  const auto ranked = coalesce_key(r, "video.rank_updated", payload);
  const auto trending = coalesce_key(r, "video.trending", payload);
  ASSERT_TRUE(ranked);
  ASSERT_TRUE(trending);
  EXPECT_NE(*ranked, *trending);
  // Nor can a type and a value be shifted between the two halves of the key.
  const auto shifted_a = coalesce_key(rule("/k"), "a", R"({"k":"b"})");
  const auto shifted_b = coalesce_key(rule("/k"), "ab", R"({"k":""})");
  ASSERT_TRUE(shifted_a && shifted_b);
  EXPECT_NE(*shifted_a, *shifted_b);
}

TEST(coalesce, the_string_one_and_the_number_one_are_different_keys) {
  const auto r = rule("/id");
  const auto number = coalesce_key(r, "t", R"({"id":1})");
  const auto text = coalesce_key(r, "t", R"({"id":"1"})");
  const auto boolean = coalesce_key(r, "t", R"({"id":true})");
  const auto text_true = coalesce_key(r, "t", R"({"id":"true"})");
  ASSERT_TRUE(number && text && boolean && text_true);
  EXPECT_NE(*number, *text);
  EXPECT_NE(*boolean, *text_true);
  // A null value is a value: the key is present.
  EXPECT_TRUE(coalesce_key(r, "t", R"({"id":null})"));
}

TEST(coalesce, nested_escaped_and_array_pointers) {
  const auto nested = rule("/data/video_id");
  EXPECT_EQ(coalesce_key(nested, "t", R"({"data":{"video_id":5}})"),
            coalesce_key(nested, "t", R"({"data":{"video_id":5,"x":1},"y":2})"));
  EXPECT_NE(coalesce_key(nested, "t", R"({"data":{"video_id":5}})"),
            coalesce_key(nested, "t", R"({"data":{"video_id":6}})"));

  // RFC 6901: ~1 is '/', ~0 is '~'.
  const auto escaped = rule("/a~1b/c~0d");
  const auto found = coalesce_key(escaped, "t", R"({"a/b":{"c~d":7}})");
  ASSERT_TRUE(found);
  EXPECT_EQ(found, coalesce_key(escaped, "t", R"({"a/b":{"c~d":7},"a":{"b":0}})"));
  EXPECT_NE(found, coalesce_key(escaped, "t", R"({"a/b":{"c~d":8}})"));
  EXPECT_FALSE(coalesce_key(escaped, "t", R"({"a":{"b":{"c~d":7}}})"));

  const auto element = rule("/items/0");
  EXPECT_EQ(coalesce_key(element, "t", R"({"items":["x","y"]})"),
            coalesce_key(element, "t", R"({"items":["x","z"]})"));
  EXPECT_FALSE(coalesce_key(element, "t", R"({"items":[]})"));
}

// id -> the id it is replaced by (0: sent itself).
std::map<std::int64_t, std::int64_t> plan(const std::vector<coalesce_candidate>& rows,
                                          double window) {
  const auto replaced = plan_coalescing(rows, window);
  EXPECT_EQ(replaced.size(), rows.size());
  std::map<std::int64_t, std::int64_t> out;
  for (std::size_t i = 0; i < rows.size() && i < replaced.size(); ++i)
    out[rows[i].id] = replaced[i];
  return out;
}

TEST(coalesce, plan_keeps_the_newest_row_of_a_key) {
  const std::vector<coalesce_candidate> rows = {
      {.id = 1, .created_at = 100, .key = "k"},
      {.id = 2, .created_at = 103, .key = "k"},
      {.id = 3, .created_at = 101, .key = "k"},  // created later than 1, but older than 2
  };
  EXPECT_EQ(plan(rows, 10), (std::map<std::int64_t, std::int64_t>{{1, 2}, {2, 0}, {3, 2}}));
}

TEST(coalesce, plan_breaks_created_at_ties_by_the_highest_id) {
  const std::vector<coalesce_candidate> rows = {
      {.id = 9, .created_at = 100, .key = "k"},
      {.id = 4, .created_at = 100, .key = "k"},
      {.id = 7, .created_at = 100, .key = "k"},
  };
  EXPECT_EQ(plan(rows, 10), (std::map<std::int64_t, std::int64_t>{{4, 9}, {7, 9}, {9, 0}}));
}

TEST(coalesce, plan_starts_a_new_window_for_rows_further_back) {
  // Newest 120 keeps 111 (9 s back) and 110 (10 s back: within); 105 is 15 s back, so it is
  // kept and takes 100 (5 s back from it) and 95 (10 s); 94 is 11 s back from 105: kept alone.
  const std::vector<coalesce_candidate> rows = {
      {.id = 1, .created_at = 94, .key = "k"},  {.id = 2, .created_at = 95, .key = "k"},
      {.id = 3, .created_at = 100, .key = "k"}, {.id = 4, .created_at = 105, .key = "k"},
      {.id = 5, .created_at = 110, .key = "k"}, {.id = 6, .created_at = 111, .key = "k"},
      {.id = 7, .created_at = 120, .key = "k"},
  };
  EXPECT_EQ(plan(rows, 10), (std::map<std::int64_t, std::int64_t>{
                                {1, 0}, {2, 4}, {3, 4}, {4, 0}, {5, 7}, {6, 7}, {7, 0}}));
  // A wider window takes them all; a narrower one fewer.
  EXPECT_EQ(plan(rows, 30), (std::map<std::int64_t, std::int64_t>{
                                {1, 7}, {2, 7}, {3, 7}, {4, 7}, {5, 7}, {6, 7}, {7, 0}}));
  EXPECT_EQ(plan(rows, 0.5), (std::map<std::int64_t, std::int64_t>{
                                 {1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}, {6, 0}, {7, 0}}));
}

TEST(coalesce, plan_keeps_rows_without_a_key_and_never_merges_keys) {
  const std::vector<coalesce_candidate> rows = {
      {.id = 1, .created_at = 100, .key = std::nullopt},
      {.id = 2, .created_at = 100, .key = std::nullopt},  // two keyless rows: both sent
      {.id = 3, .created_at = 101, .key = "a"},
      {.id = 4, .created_at = 101, .key = "b"},
      {.id = 5, .created_at = 102, .key = "a"},
      {.id = 6, .created_at = 100, .key = "b"},
      {.id = 7, .created_at = 103, .key = "c"},
      {.id = 8, .created_at = 109, .key = std::nullopt},
  };
  EXPECT_EQ(plan(rows, 10), (std::map<std::int64_t, std::int64_t>{
                                {1, 0}, {2, 0}, {3, 5}, {4, 0}, {5, 0}, {6, 4}, {7, 0}, {8, 0}}));
  EXPECT_TRUE(plan_coalescing({}, 10).empty());
}

TEST(coalesce, plan_does_not_depend_on_input_order) {
  std::vector<coalesce_candidate> rows = {
      {.id = 1, .created_at = 100, .key = "a"}, {.id = 2, .created_at = 108, .key = "a"},
      {.id = 3, .created_at = 112, .key = "a"}, {.id = 4, .created_at = 104, .key = "b"},
      {.id = 5, .created_at = 104, .key = "b"}, {.id = 6, .created_at = 90, .key = std::nullopt},
  };
  const auto expected = plan(rows, 10);
  // 112 keeps 108; 100 is 12 s back and kept; b ties on time and 5 wins.
  EXPECT_EQ(expected,
            (std::map<std::int64_t, std::int64_t>{{1, 0}, {2, 3}, {3, 0}, {4, 5}, {5, 0}, {6, 0}}));
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  int orders = 0;
  do {
    ASSERT_EQ(plan(rows, 10), expected) << "order " << orders;
    ++orders;
  } while (std::next_permutation(rows.begin(), rows.end(),
                                 [](const auto& a, const auto& b) { return a.id < b.id; }));
  EXPECT_EQ(orders, 720);
}

// A row that already stands for older rows carries their age: merging it into a newer row is
// allowed only while the oldest of the chain is within the window of the keeper, so no event
// waits more than one window for the delivery that replaces it.
TEST(coalesce, plan_counts_the_window_along_the_merge_chain) {
  const std::vector<coalesce_candidate> rows = {
      // 104 stands for a row of 97 merged into it earlier: 109 - 97 = 12 > 10, so it is sent.
      {.id = 1, .created_at = 104, .key = "a", .stands_since = 97.0},
      {.id = 2, .created_at = 109, .key = "a"},
      // 105 stands for 100: 109 - 100 = 9 fits, so it merges into 2.
      {.id = 3, .created_at = 105, .key = "b", .stands_since = 100.0},
      {.id = 4, .created_at = 109, .key = "b"},
  };
  EXPECT_EQ(plan(rows, 10), (std::map<std::int64_t, std::int64_t>{{1, 0}, {2, 0}, {3, 4}, {4, 0}}));
  // Without the chain's age, both would merge.
  std::vector<coalesce_candidate> unchained = rows;
  for (auto& row : unchained) row.stands_since.reset();
  EXPECT_EQ(plan(unchained, 10),
            (std::map<std::int64_t, std::int64_t>{{1, 2}, {2, 0}, {3, 4}, {4, 0}}));
}

// A chain kept from merging goes out, and older rows may still merge into it by their own age.
TEST(coalesce, plan_lets_older_rows_join_a_chain_that_was_kept) {
  const std::vector<coalesce_candidate> rows = {
      {.id = 1, .created_at = 100, .key = "a"},
      {.id = 2, .created_at = 103, .key = "a", .stands_since = 95.0},
      {.id = 3, .created_at = 108, .key = "a"},
  };
  // 3 keeps; 2's chain starts at 95, 13 s before 108: kept; 1 is 3 s older than 2: merges.
  EXPECT_EQ(plan(rows, 10), (std::map<std::int64_t, std::int64_t>{{1, 2}, {2, 0}, {3, 0}}));
}

TEST(coalesce, a_merge_keeps_the_oldest_start_of_both_chains) {
  const coalesce_candidate keeper{.id = 2, .created_at = 110, .key = "a"};
  const coalesce_candidate merged{.id = 1, .created_at = 104, .key = "a", .stands_since = 99.0};
  EXPECT_EQ(stands_since_after_merge(keeper, merged), 99.0);
  const coalesce_candidate chained{.id = 3, .created_at = 112, .key = "a", .stands_since = 90.0};
  EXPECT_EQ(stands_since_after_merge(chained, merged), 90.0);
  const coalesce_candidate plain{.id = 0, .created_at = 101, .key = "a"};
  EXPECT_EQ(stands_since_after_merge(keeper, plain), 101.0);
}

}  // namespace
}  // namespace surge::proto
