#include "proto/event_match.hpp"

#include <gtest/gtest.h>

namespace surge::proto {
namespace {

TEST(event_match, star_matches_everything) {
  EXPECT_TRUE(event_matches("*", "video.trending"));
  EXPECT_TRUE(event_matches("*", "anything"));
  EXPECT_TRUE(event_matches(" * ", "video.rank_updated"));
  EXPECT_TRUE(event_matches("video.trending, *", "user.created"));
}

TEST(event_match, exact) {
  EXPECT_TRUE(event_matches("video.trending", "video.trending"));
  EXPECT_FALSE(event_matches("video.trending", "video.trending2"));
  EXPECT_FALSE(event_matches("video.trending", "video"));
  EXPECT_FALSE(event_matches("video.trending", "Video.Trending"));
  EXPECT_FALSE(event_matches("video", "video.trending"));
}

TEST(event_match, prefix) {
  EXPECT_TRUE(event_matches("video.*", "video.trending"));
  EXPECT_TRUE(event_matches("video.*", "video.x.y"));
  EXPECT_FALSE(event_matches("video.*", "video"));
  EXPECT_FALSE(event_matches("video.*", "video."));
  EXPECT_FALSE(event_matches("video.*", "videos.x"));
  EXPECT_FALSE(event_matches("video.*", "user.video.x"));
  EXPECT_TRUE(event_matches("video.rank.*", "video.rank.up"));
  EXPECT_FALSE(event_matches("video.rank.*", "video.ranking"));
}

TEST(event_match, lists) {
  const std::string_view filter = " video.trending ,user.* ,, ,\tvideo.rank_updated ";
  EXPECT_TRUE(event_matches(filter, "video.trending"));
  EXPECT_TRUE(event_matches(filter, "video.rank_updated"));
  EXPECT_TRUE(event_matches(filter, "user.deleted"));
  EXPECT_FALSE(event_matches(filter, "video.velocity_changed"));
  EXPECT_FALSE(event_matches(filter, ""));
  EXPECT_TRUE(event_matches("a,b,c", "c"));
}

TEST(event_match, empty_filters_match_nothing) {
  EXPECT_FALSE(event_matches("", "video.trending"));
  EXPECT_FALSE(event_matches(" , ,", "video.trending"));
  EXPECT_FALSE(event_matches("", ""));
}

TEST(event_match, validate_accepts_good_filters) {
  for (std::string_view good : {"*", "video.trending", "video.*", " video.* , user.created ",
                                "a,,b", "video.rank.*", "*,video.x"}) {
    EXPECT_EQ(validate_event_patterns(good), "") << good;
  }
}

TEST(event_match, validate_rejects_bad_filters) {
  EXPECT_EQ(validate_event_patterns(""), "event filter has no patterns");
  EXPECT_EQ(validate_event_patterns(" , "), "event filter has no patterns");
  EXPECT_EQ(validate_event_patterns("video.x,vi*deo"),
            "'*' must be a whole pattern or follow a final '.' in 'vi*deo'");
  EXPECT_EQ(validate_event_patterns("video trending"),
            "whitespace inside event pattern 'video trending'");
  for (std::string_view bad : {"video*", "*.video", "video.**", "**", "video.*.x", ".*",
                               "video.\ttrending", "video.x, user .y", "a,b*"}) {
    EXPECT_NE(validate_event_patterns(bad), "") << bad;
  }
}

TEST(event_match, json_arrays_match_as_their_entries_do) {
  const std::string_view events = R"(["video.*", "user.signup"])";
  EXPECT_TRUE(event_array_matches(events, "video.trending"));
  EXPECT_TRUE(event_array_matches(events, "user.signup"));
  EXPECT_FALSE(event_array_matches(events, "user.deleted"));
  EXPECT_FALSE(event_array_matches(events, "video"));
  EXPECT_FALSE(event_array_matches(events, "videos.x"));
  EXPECT_TRUE(event_array_matches(R"(["*"])", "anything"));
  // An element is one pattern: a comma inside it is no list.
  EXPECT_FALSE(event_array_matches(R"(["a,b"])", "a"));
  EXPECT_TRUE(event_array_matches(R"(["a,b"])", "a,b"));
}

TEST(event_match, json_arrays_that_cannot_be_read_match_nothing) {
  for (std::string_view bad : {"", "*", "video.*", R"("video.*")", R"(["video.*")", "[1]",
                               R"({"events":["*"]})", R"(["*", null])"}) {
    EXPECT_FALSE(event_array_matches(bad, "video.trending")) << bad;
    EXPECT_FALSE(parse_event_array(bad).has_value()) << bad;
  }
  EXPECT_FALSE(event_array_matches("[]", "video.trending"));
  EXPECT_EQ(parse_event_array("[]")->size(), 0u);
}

TEST(event_match, json_arrays_from_comma_lists) {
  EXPECT_EQ(event_array_from_patterns(" video.* , user.signup,,"), R"(["video.*","user.signup"])");
  EXPECT_EQ(event_array_from_patterns("*"), R"(["*"])");
  EXPECT_EQ(event_array_from_patterns(""), "[]");
  const auto back = parse_event_array(event_array_from_patterns("a.*,b"));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, (std::vector<std::string>{"a.*", "b"}));
}

}  // namespace
}  // namespace surge::proto
