// What --until-drained waits for (engine/storage_thread/until_drained.hpp): the subscribers whose
// rows can be sent within its wait, and the retries due within it.
#include "engine/storage_thread/until_drained.hpp"

#include <chrono>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace surge::engine {
namespace {

using namespace std::chrono_literals;

const until_drained_wait wait{.retry_wait = 60s, .pause_release_threshold = 5s};
constexpr double now = 1'800'000'000.0;

proto::id_set ids(const char* text) { return proto::id_set::parse(text).value(); }

TEST(UntilDrained, EverySubscriberChosenCountsWhileAllCanSend) {
  const std::vector<std::pair<std::int64_t, bool>> sendable{{1, true}, {2, true}};
  EXPECT_EQ(drainable_subscribers(proto::id_set{}, wait, now, sendable, {}), proto::id_set{});
  EXPECT_EQ(drainable_subscribers(ids("1-2"), wait, now, sendable, {}), ids("1-2"));
}

TEST(UntilDrained, SubscribersThatCannotSendAreNotWaitedFor) {
  const std::vector<std::pair<std::int64_t, bool>> sendable{{1, true}, {2, false}, {3, true}};
  EXPECT_EQ(drainable_subscribers(proto::id_set{}, wait, now, sendable, {}), ids("1,3"));
}

TEST(UntilDrained, HeldSubscribersCountOnlyIfTheyMaySendWithinTheWait) {
  const std::vector<std::pair<std::int64_t, bool>> sendable{{1, true}, {2, true}, {3, true}};
  const std::vector<held_subscriber> held{
      {.id = 1, .kind = "circuit_open", .until_unix = now + 30},  // within the wait
      {.id = 2, .kind = "paused", .until_unix = now + 3600},      // past it
      {.id = 3, .kind = "credentials", .until_unix = 0}};         // until an operator acts
  EXPECT_EQ(drainable_subscribers(proto::id_set{}, wait, now, sendable, held), ids("1"));
  // Without a retry wait, a pause shorter than the release threshold is still waited out.
  const until_drained_wait no_retry_wait{.retry_wait = 0s, .pause_release_threshold = 5s};
  const std::vector<held_subscriber> short_pause{{.id = 1, .until_unix = now + 4},
                                                 {.id = 2, .until_unix = now + 6}};
  EXPECT_EQ(drainable_subscribers(proto::id_set{}, no_retry_wait, now, sendable, short_pause),
            ids("1,3"));
}

TEST(UntilDrained, NoSubscriberThatCanSendSelectsNone) {
  const std::vector<std::pair<std::int64_t, bool>> sendable{{1, false}};
  const auto none = drainable_subscribers(proto::id_set{}, wait, now, sendable, {});
  EXPECT_FALSE(none.all());
  EXPECT_FALSE(none.contains(1));
}

TEST(UntilDrained, RetriesDueWithinTheWaitKeepAnEmptyDrainWaiting) {
  EXPECT_TRUE(retry_due_within_wait(true, 0, 59.0, 60s));
  EXPECT_TRUE(retry_due_within_wait(true, 0, -1.0, 60s));  // overdue
  EXPECT_FALSE(retry_due_within_wait(true, 0, 61.0, 60s));
  EXPECT_FALSE(retry_due_within_wait(true, 0, std::nullopt, 60s));
  // Without a wait, nothing scheduled is waited for.
  EXPECT_FALSE(retry_due_within_wait(true, 0, 1.0, 0s));
  // Work still outstanding or in the shards keeps the drain going by itself.
  EXPECT_FALSE(retry_due_within_wait(false, 0, 1.0, 60s));
  EXPECT_FALSE(retry_due_within_wait(true, 3, 1.0, 60s));
}

}  // namespace
}  // namespace surge::engine
