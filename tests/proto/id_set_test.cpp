#include "proto/id_set.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace surge::proto {
namespace {

using ranges_t = std::vector<std::pair<std::int64_t, std::int64_t>>;
constexpr auto max_id = std::numeric_limits<std::int64_t>::max();

id_set parsed(std::string_view text) {
  std::string error;
  auto set = id_set::parse(text, &error);
  EXPECT_TRUE(set.has_value()) << text << ": " << error;
  return set.value_or(id_set{});
}

std::string error_of(std::string_view text) {
  std::string error;
  EXPECT_FALSE(id_set::parse(text, &error).has_value()) << text;
  return error;
}

TEST(id_set, default_is_everything) {
  const id_set all;
  EXPECT_TRUE(all.all());
  EXPECT_TRUE(all.contains(1));
  EXPECT_TRUE(all.contains(max_id));
  EXPECT_TRUE(all.ranges().empty());
  EXPECT_EQ(all.to_string(), "*");
  EXPECT_TRUE(parsed("*").all());
}

TEST(id_set, parses_lists_and_ranges) {
  const id_set s = parsed("1,4,10-20");
  EXPECT_FALSE(s.all());
  EXPECT_EQ(s.ranges(), (ranges_t{{1, 1}, {4, 4}, {10, 20}}));
  for (std::int64_t id : {1, 4, 10, 15, 20}) EXPECT_TRUE(s.contains(id)) << id;
  for (std::int64_t id : {std::int64_t{0}, std::int64_t{2}, std::int64_t{3}, std::int64_t{5},
                          std::int64_t{9}, std::int64_t{21}, std::int64_t{-1}, max_id})
    EXPECT_FALSE(s.contains(id)) << id;
}

TEST(id_set, spaces_are_allowed) {
  EXPECT_EQ(parsed(" 1 , 4 ,\t10 - 20 ").ranges(), (ranges_t{{1, 1}, {4, 4}, {10, 20}}));
}

TEST(id_set, sorts_and_merges) {
  EXPECT_EQ(parsed("30,10-20,15-25,1,2,3,5").ranges(),
            (ranges_t{{1, 3}, {5, 5}, {10, 25}, {30, 30}}));
  EXPECT_EQ(parsed("5,5,5").ranges(), (ranges_t{{5, 5}}));
  EXPECT_EQ(parsed("1-3,4-6").ranges(), (ranges_t{{1, 6}}));
  EXPECT_EQ(parsed("1-100,20-30").ranges(), (ranges_t{{1, 100}}));
  EXPECT_EQ(parsed("0").ranges(), (ranges_t{{0, 0}}));
  EXPECT_EQ(parsed("9223372036854775800-9223372036854775807,5-9223372036854775806").ranges(),
            (ranges_t{{5, max_id}}));
  EXPECT_TRUE(parsed("9223372036854775807").contains(max_id));
}

TEST(id_set, to_string_round_trips) {
  for (std::string_view text :
       {"1", "1,4,10-20", " 20-10000 , 3 ,4,5", "0-9223372036854775807", "7,1-2,9-9"}) {
    const id_set s = parsed(text);
    const id_set again = parsed(s.to_string());
    EXPECT_EQ(again.ranges(), s.ranges()) << text;
    EXPECT_EQ(again.to_string(), s.to_string());
  }
  EXPECT_EQ(parsed(" 20-30 , 3 ,4,5").to_string(), "3-5,20-30");
}

TEST(id_set, errors_name_the_entry) {
  EXPECT_EQ(error_of(""), "empty id list");
  EXPECT_EQ(error_of("  "), "empty id list");
  EXPECT_EQ(error_of("1,,2"), "empty entry");
  EXPECT_EQ(error_of("1,"), "empty entry");
  EXPECT_EQ(error_of("1,abc"), "'abc' is not an id or an id range");
  EXPECT_EQ(error_of("20-10"), "reversed range '20-10'");
  EXPECT_EQ(error_of("-5"), "negative id in '-5'");
  EXPECT_EQ(error_of("3,5--7"), "negative id in '5--7'");
  EXPECT_EQ(error_of("99999999999999999999"), "id too large in '99999999999999999999'");
  EXPECT_EQ(error_of("1-9223372036854775808"), "id too large in '1-9223372036854775808'");
  for (std::string_view bad : {"1-", "1-2-3", "+4", "1.5", "0x10", "1 2", "*,1", "a-b", "4-x"}) {
    EXPECT_FALSE(error_of(bad).empty()) << bad;
  }
  EXPECT_FALSE(id_set::parse("nope").has_value());  // error pointer is optional
}

}  // namespace
}  // namespace surge::proto
