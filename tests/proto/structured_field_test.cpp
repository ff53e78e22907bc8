#include "proto/structured_field.hpp"

#include <array>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace surge::proto::sf {
namespace {

constexpr std::array<std::string_view, 2> keys = {"a", "b"};

// The members of a List, or nullopt when it does not parse.
std::optional<std::vector<list_member>> read(std::string_view line) {
  list_reader reader(line, keys);
  std::vector<list_member> members;
  list_member member;
  while (true) {
    switch (reader.next(member)) {
      case list_step::member: members.push_back(member); break;
      case list_step::end: return members;
      case list_step::invalid: return std::nullopt;
    }
  }
}

TEST(StructuredField, ListsOfBareItems) {
  const auto members =
      read("1, -42, 4.5, \"text\", tok/en:1, :aGk=:, ?1, @1659578233, %\"f%c3%bc\"");
  ASSERT_TRUE(members.has_value());
  ASSERT_EQ(members->size(), 9u);
  const bare_kind kinds[] = {bare_kind::integer, bare_kind::integer, bare_kind::decimal,
                             bare_kind::string,  bare_kind::token,   bare_kind::byte_sequence,
                             bare_kind::boolean, bare_kind::date,    bare_kind::display};
  for (std::size_t i = 0; i < members->size(); ++i) {
    EXPECT_EQ((*members)[i].item.kind, kinds[i]) << i;
    EXPECT_FALSE((*members)[i].inner_list);
  }
  EXPECT_EQ((*members)[0].item.integer, 1);
  EXPECT_EQ((*members)[1].item.integer, -42);
  EXPECT_EQ((*members)[3].item.text, "text");
  EXPECT_EQ((*members)[4].item.text, "tok/en:1");
  EXPECT_EQ((*members)[7].item.integer, 1659578233);
}

TEST(StructuredField, IntegersHaveAtMostFifteenDigits) {
  const auto largest = read("999999999999999, -999999999999999, 000000000000001");
  ASSERT_TRUE(largest.has_value());
  EXPECT_EQ((*largest)[0].item.integer, 999999999999999);
  EXPECT_EQ((*largest)[1].item.integer, -999999999999999);
  EXPECT_EQ((*largest)[2].item.integer, 1);
  EXPECT_FALSE(read("1000000000000000").has_value());
  EXPECT_FALSE(read("-1000000000000000").has_value());
  EXPECT_TRUE(read("123456789012.123").has_value());
  EXPECT_FALSE(read("1234567890123.1").has_value());
  EXPECT_FALSE(read("123456789012.1234").has_value());
}

TEST(StructuredField, WantedParametersKeepTheirLastValue) {
  const auto members = read("x;a=1;c=3;b;a=2, (y z);a=5");
  ASSERT_TRUE(members.has_value());
  ASSERT_EQ(members->size(), 2u);
  const list_member& first = (*members)[0];
  ASSERT_TRUE(first.parameters[0].has_value());
  EXPECT_EQ(first.parameters[0]->kind, bare_kind::integer);
  EXPECT_EQ(first.parameters[0]->integer, 2);
  ASSERT_TRUE(first.parameters[1].has_value());
  EXPECT_EQ(first.parameters[1]->kind, bare_kind::boolean);  // a key alone is true
  EXPECT_EQ(first.parameters[1]->integer, 1);
  EXPECT_FALSE(first.parameters[2].has_value());
  const list_member& second = (*members)[1];
  EXPECT_TRUE(second.inner_list);
  ASSERT_TRUE(second.parameters[0].has_value());
  EXPECT_EQ(second.parameters[0]->integer, 5);
}

TEST(StructuredField, ValidEdgeCases) {
  for (std::string_view good : {
           "",
           "   ",
           "a",
           "  a  ",
           "a,b",
           "a ,\tb",
           "()",
           "( )",
           "(a b);x",
           "( a  b )",
           "*tok",
           "a;*k=1",
           "a;k-1_.*=1",
           "\"\"",
           R"("\"\\")",
           "::",
           "%\"\"",
           "%\"\\\"",
           "%\"%e2%82%ac\"",
           "a; b=?0",
           "1.0, -1.5, 0.001",
       }) {
    EXPECT_TRUE(read(good).has_value()) << good;
  }
}

TEST(StructuredField, InvalidLists) {
  for (std::string_view bad : {
           ",",           "a,",
           ",a",          "a,,b",
           "a b",         "+1",
           "1.",          ".1",
           "1.2.3",       "-",
           "-a",          "\"open",
           "\"\\n\"",     "\"\x01\"",
           "\"\x7f\"",    "(a",
           "(a,b)",       "(a)b",
           "a;",          "a;K=1",
           "a;1=1",       "a;=1",
           "a;k=",        "?2",
           "?",           ":abc",
           ":a!:",        "@1.5",
           "@x",          "%a",
           "%\"%C3%BC\"", "%\"%c3\"",
           "%\"%ff\"",    "%\"\xc3\xbc\"",
           "%\"%c3%28\"", "#x",
           "a\x01",       "\t,a",
       }) {
    EXPECT_FALSE(read(bad).has_value()) << bad;
  }
}

TEST(StructuredField, ReadingStopsAtTheFirstError) {
  list_reader reader("a, b c, d", keys);
  list_member member;
  EXPECT_EQ(reader.next(member), list_step::member);
  EXPECT_EQ(reader.next(member), list_step::invalid);
  EXPECT_EQ(reader.next(member), list_step::invalid);
}

TEST(StructuredField, SameTextComparesUnescaped) {
  EXPECT_TRUE(same_text("abc", true, "abc", false));
  EXPECT_TRUE(same_text(R"(a\"b)", true, R"(a\"b)", true));
  EXPECT_TRUE(same_text(R"(a\\b)", true, R"(a\\b)", true));
  // Not quoted, a backslash is a character of its own.
  EXPECT_FALSE(same_text(R"(a\"b)", false, "a\"b", false));
  EXPECT_TRUE(same_text(R"(a\"b)", true, "a\"b", true));
  EXPECT_FALSE(same_text("abc", true, "abcd", true));
  EXPECT_FALSE(same_text("abc", true, "Abc", true));
  EXPECT_TRUE(same_text("", true, "", false));
}

}  // namespace
}  // namespace surge::proto::sf
