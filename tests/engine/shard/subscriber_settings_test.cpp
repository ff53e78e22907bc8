// A subscriber row as the shard reads it: which settings pause it, and which make it unusable.
#include "engine/shard/subscriber.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace surge::engine {
namespace {

storage::subscriber_row sample() {
  storage::subscriber_row row;
  row.id = 7;
  row.url = "https://partner.example/hook";
  row.secret = "secret";
  row.rate_per_sec = 5;
  row.burst = 10;
  return row;
}

TEST(SubscriberSettings, UsableLimitsPassThrough) {
  const auto settings = derive_settings(sample(), {});
  EXPECT_TRUE(settings.limits_problem.empty());
  EXPECT_TRUE(settings.unusable_reason.empty());
  EXPECT_EQ(settings.rate, 5);
  EXPECT_EQ(settings.burst, 10);
  EXPECT_TRUE(sends_now(sample()));
}

TEST(SubscriberSettings, UnusableLimitsPauseWithAMessageQuotingTheValue) {
  auto row = sample();
  row.rate_text = "'fast'";
  row.rate_per_sec = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(limits_problem(row), "rate_per_sec 'fast' is not a number");
  const auto settings = derive_settings(row, {});
  EXPECT_EQ(settings.rate, 0);  // paused, not guessed at
  EXPECT_TRUE(settings.unusable_reason.empty()) << "its rows must not be dead-lettered";
  EXPECT_FALSE(sends_now(row));

  row = sample();
  row.rate_per_sec = -5;
  EXPECT_EQ(limits_problem(row), "rate_per_sec -5 is not a finite number >= 0");
  row.rate_per_sec = std::numeric_limits<double>::infinity();
  EXPECT_EQ(limits_problem(row), "rate_per_sec inf is not a finite number >= 0");
  row = sample();
  row.burst_text = "'big'";
  row.burst = 0;
  EXPECT_EQ(limits_problem(row), "burst 'big' is not a number");
  row = sample();
  row.burst = 0;
  EXPECT_EQ(limits_problem(row), "burst 0 is below 1");
  EXPECT_FALSE(sends_now(row));
}

TEST(SubscriberSettings, InactiveIsPausedNotUnusable) {
  auto row = sample();
  row.active = false;
  const auto settings = derive_settings(row, {});
  EXPECT_FALSE(settings.active);
  EXPECT_TRUE(settings.unusable_reason.empty());
  EXPECT_FALSE(sends_now(row));
  row.active = true;
  row.rate_per_sec = 0;
  EXPECT_FALSE(sends_now(row));
}

TEST(SubscriberSettings, BatchAndCoalescingAreOffByDefault) {
  const auto settings = derive_settings(sample(), {});
  EXPECT_EQ(settings.batch_rows, 1);
  EXPECT_EQ(settings.batch_bytes, proto::max_batch_bytes);
  EXPECT_EQ(settings.batch_linger, std::chrono::milliseconds(500));
  EXPECT_FALSE(settings.coalesce);
  EXPECT_EQ(settings.relief_problem, "");
}

TEST(SubscriberSettings, UsableBatchSettingsPassThrough) {
  auto row = sample();
  row.batch_max = 500;
  row.batch_bytes = 2;
  row.batch_linger = 60;
  auto settings = derive_settings(row, {});
  EXPECT_EQ(settings.batch_rows, 500);
  EXPECT_EQ(settings.batch_bytes, 2);
  EXPECT_EQ(settings.batch_linger, std::chrono::seconds(60));
  EXPECT_EQ(settings.relief_problem, "");
  row.batch_max = 100;
  row.batch_bytes = 4096;
  row.batch_linger = 0;  // no waiting: send what is due
  settings = derive_settings(row, {});
  EXPECT_EQ(settings.batch_rows, 100);
  EXPECT_EQ(settings.batch_bytes, 4096);
  EXPECT_EQ(settings.batch_linger, std::chrono::steady_clock::duration::zero());
  EXPECT_EQ(settings.relief_problem, "");
  EXPECT_TRUE(settings.unusable_reason.empty());
}

// Another program can store anything: the value is clamped to the limits and said, and the
// subscriber keeps sending.
TEST(SubscriberSettings, BatchValuesOutsideTheLimitsAreClampedAndSaid) {
  struct rows_case {
    std::int64_t stored;
    int used;
  };
  for (const auto [stored, used] :
       {rows_case{0, 1}, rows_case{-5, 1}, rows_case{501, 500}, rows_case{1'000'000, 500}}) {
    auto row = sample();
    row.batch_max = stored;
    const auto settings = derive_settings(row, {});
    EXPECT_EQ(settings.batch_rows, used) << stored;
    EXPECT_NE(settings.relief_problem.find("batch_max " + std::to_string(stored)),
              std::string::npos)
        << settings.relief_problem;
    EXPECT_NE(settings.relief_problem.find("using " + std::to_string(used)), std::string::npos);
    EXPECT_TRUE(settings.unusable_reason.empty());
  }
  for (const std::int64_t stored : {std::int64_t{0}, std::int64_t{-1}, std::int64_t{1'048'577}}) {
    auto row = sample();
    row.batch_bytes = stored;
    const auto settings = derive_settings(row, {});
    EXPECT_EQ(settings.batch_bytes, proto::max_batch_bytes) << stored;
    EXPECT_NE(settings.relief_problem.find("batch_bytes " + std::to_string(stored)),
              std::string::npos)
        << settings.relief_problem;
  }
  for (const double stored : {std::numeric_limits<double>::quiet_NaN(), -1.0, 61.0,
                              std::numeric_limits<double>::infinity()}) {
    auto row = sample();
    row.batch_linger = stored;
    const auto settings = derive_settings(row, {});
    EXPECT_EQ(settings.batch_linger, std::chrono::milliseconds(500)) << stored;
    EXPECT_NE(settings.relief_problem.find("batch_linger"), std::string::npos) << stored;
  }
}

TEST(SubscriberSettings, AGoodCoalescingRuleIsSet) {
  auto row = sample();
  row.coalesce_key = "/data/video_id";
  row.coalesce_window = 2.5;
  row.coalesce_events = "video.rank_updated, video.views.*";
  const auto settings = derive_settings(row, {});
  ASSERT_TRUE(settings.coalesce);
  EXPECT_EQ(settings.coalesce->pointer, "/data/video_id");
  EXPECT_EQ(settings.coalesce->window_seconds, 2.5);
  EXPECT_EQ(settings.coalesce->event_types, "video.rank_updated, video.views.*");
  EXPECT_EQ(settings.relief_problem, "");
  // The rule as derived does what the stored row says.
  EXPECT_TRUE(
      proto::coalesce_key(*settings.coalesce, "video.views.daily", R"({"data":{"video_id":1}})"));
  EXPECT_FALSE(
      proto::coalesce_key(*settings.coalesce, "video.trending", R"({"data":{"video_id":1}})"));
}

TEST(SubscriberSettings, ABadCoalescingRuleTurnsCoalescingOffAndSaysWhy) {
  struct bad_case {
    std::string key, events;
    double window;
    std::string mentions;
  };
  const std::vector<bad_case> cases = {
      {"data/video_id", "*", 10, "must start with '/'"},
      {"/a~2", "*", 10, "'~'"},
      {"/data/id", "video*", 10, "coalesce_events"},
      {"/data/id", " , ", 10, "coalesce_events"},
      {"/data/id", "*", 0, "coalesce_window"},
      {"/data/id", "*", -1, "coalesce_window"},
      {"/data/id", "*", 3601, "coalesce_window"},
      {"/data/id", "*", std::numeric_limits<double>::quiet_NaN(), "coalesce_window"},
  };
  for (const auto& c : cases) {
    auto row = sample();
    row.coalesce_key = c.key;
    row.coalesce_events = c.events;
    row.coalesce_window = c.window;
    const auto settings = derive_settings(row, {});
    EXPECT_FALSE(settings.coalesce) << c.key << " " << c.events << " " << c.window;
    EXPECT_NE(settings.relief_problem.find(c.mentions), std::string::npos)
        << settings.relief_problem;
    EXPECT_NE(settings.relief_problem.find("not coalescing"), std::string::npos);
    EXPECT_TRUE(settings.unusable_reason.empty()) << "its rows are still sent";
  }
  // An empty key is simply off, with nothing to say, even beside unusable other values.
  auto row = sample();
  row.coalesce_key = "";
  row.coalesce_window = -1;
  row.coalesce_events = "video*";
  const auto settings = derive_settings(row, {});
  EXPECT_FALSE(settings.coalesce);
  EXPECT_EQ(settings.relief_problem, "");
}

TEST(SubscriberSettings, SeveralReliefProblemsAreAllSaid) {
  auto row = sample();
  row.batch_max = 0;
  row.batch_linger = -1;
  row.coalesce_key = "x";
  const auto settings = derive_settings(row, {});
  EXPECT_NE(settings.relief_problem.find("batch_max"), std::string::npos);
  EXPECT_NE(settings.relief_problem.find("batch_linger"), std::string::npos);
  EXPECT_NE(settings.relief_problem.find("coalesce_key 'x'"), std::string::npos);
}

TEST(SubscriberSettings, AStoredProxyIsUsedAndOneThatCannotBeHoldsTheSubscriber) {
  auto row = sample();
  row.proxy = "http://Egress.Internal:3128";
  auto settings = derive_settings(row, {});
  ASSERT_NE(settings.proxy, nullptr);
  EXPECT_EQ(settings.proxy->host, "egress.internal");
  EXPECT_EQ(settings.proxy->port, 3128);
  EXPECT_TRUE(settings.credentials_problem.empty());

  // Written by another program: never sent around, which would leave by an unexpected address.
  row.proxy = "https://user:secret@egress:3128";
  settings = derive_settings(row, {});
  EXPECT_EQ(settings.proxy, nullptr);
  EXPECT_NE(settings.credentials_problem.find("stored proxy"), std::string::npos);
  EXPECT_EQ(settings.credentials_problem.find("secret"), std::string::npos)
      << "the problem shows the proxy redacted: " << settings.credentials_problem;
  EXPECT_TRUE(settings.unusable_reason.empty()) << "its rows must not be dead-lettered";
}

}  // namespace
}  // namespace surge::engine
