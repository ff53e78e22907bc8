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

}  // namespace
}  // namespace surge::proto
