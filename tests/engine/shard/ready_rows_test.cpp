// The rules that pick what a subscriber's next request carries (engine/shard/ready_rows.hpp):
// which rows may go, which join a batch, when a batch is as big as waiting could make it, and
// which rows coalescing merges into a newer one of their key. Pure: no core, no clock.
#include "engine/shard/ready_rows.hpp"

#include <gtest/gtest.h>

#include "proto/batch.hpp"

#include <string>
#include <vector>

namespace surge::engine {
namespace {

constexpr double now_unix = 1'800'000'000.0;

storage::claimed_row row(std::int64_t id, std::string payload, double created_at = now_unix - 5) {
  storage::claimed_row out;
  out.id = id;
  out.subscriber_id = 1;
  out.event_type = "video.viewed";
  out.payload_bytes = static_cast<std::int64_t>(payload.size());
  out.payload = std::move(payload);
  out.created_at = created_at;
  out.lease = now_unix + 60;
  return out;
}

const row_checks checks{.max_payload_bytes = 1000, .lease_margin = std::chrono::seconds(11)};

std::vector<std::int64_t> ids_of(const attempt_rows& rows) {
  std::vector<std::int64_t> out;
  for (const auto& r : rows) out.push_back(r.id);
  return out;
}

TEST(ReadyRows, ABatchTakesRowsUpToItsCountAndStopsAtTheFirstThatCannotJoin) {
  ready_rows ready;
  ready.push_back(row(1, R"({"a":1})"));
  ready.push_back(row(2, R"({"a":2})"));
  ready.push_back(row(3, ""));  // over the claim's size cap, left in the database: goes alone
  ready.back().payload_bytes = 5000;
  ready.push_back(row(4, "not json"));  // cannot be an array element: goes alone
  const batch_limits limits{.rows = 5, .bytes = 10'000};
  EXPECT_TRUE(batch_full(ready, limits, checks, now_unix))
      << "row 3 cannot join, waiting adds nothing";
  bool batched = false;
  EXPECT_EQ(ids_of(take_request_rows(ready, limits, checks, now_unix, batched)),
            (std::vector<std::int64_t>{1, 2}));
  EXPECT_TRUE(batched);
  EXPECT_EQ(ids_of(take_request_rows(ready, limits, checks, now_unix, batched)),
            (std::vector<std::int64_t>{3}));
  EXPECT_FALSE(batched);
  // Only taking it reads whether a payload is JSON.
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_FALSE(batch_full(ready, limits, checks, now_unix)) << "one row of five: more may come";
  EXPECT_EQ(ids_of(take_request_rows(ready, limits, checks, now_unix, batched)),
            (std::vector<std::int64_t>{4}));
  EXPECT_FALSE(batched);
}

TEST(ReadyRows, ABatchStaysWithinItsBodyBytesAndLeavesRowsItCouldNotSendInTime) {
  ready_rows ready;
  for (int i = 1; i <= 4; ++i) ready.push_back(row(i, R"({"video":"0123456789"})"));
  const auto one = proto::batch_body_bytes(static_cast<std::int64_t>(ready[0].payload.size()), 1);
  const auto two =
      proto::batch_body_bytes(2 * static_cast<std::int64_t>(ready[0].payload.size()), 2);
  bool batched = false;
  const batch_limits tight{.rows = 4, .bytes = two};
  EXPECT_TRUE(batch_full(ready, tight, checks, now_unix));
  EXPECT_EQ(take_request_rows(ready, tight, checks, now_unix, batched).size(), 2u);
  ASSERT_GT(two, one);

  // A row whose lease would run out before its attempt could finish stays for the pump.
  ready.clear();
  ready.push_back(row(1, R"({"a":1})"));
  ready.push_back(row(2, R"({"a":2})"));
  ready[1].lease = now_unix + 5;
  EXPECT_TRUE(checks.lease_too_short(ready[1], now_unix));
  EXPECT_EQ(
      take_request_rows(ready, {.rows = 4, .bytes = 10'000}, checks, now_unix, batched).size(), 1u);
}

TEST(ReadyRows, TheRetryWindowRefusesRowsEnqueuedTooLongAgo) {
  row_checks windowed = checks;
  windowed.retry_window_seconds = 86'400;
  const auto fresh = row(1, "{}", now_unix - 60);
  const auto stale = row(2, "{}", now_unix - 86'400 - 60);
  EXPECT_EQ(checks.refusal(stale, now_unix), "");
  EXPECT_EQ(windowed.refusal(fresh, now_unix), "");
  EXPECT_EQ(windowed.refusal(stale, now_unix),
            "retry window passed: enqueued 86460 s ago, limit 86400 s");
  auto unsafe = fresh;
  unsafe.event_type = "a\r\nb";
  EXPECT_NE(windowed.refusal(unsafe, now_unix), "");
}

TEST(ReadyRows, CoalescingKeepsTheNewestOfAKeyAndCarriesTheChainsAge) {
  const proto::coalesce_rule rule{.pointer = "/video", .window_seconds = 60};
  ready_rows ready;
  ready.push_back(row(1, R"({"video":"a","rank":1})", now_unix - 30));
  ready.push_back(row(2, R"({"video":"b","rank":1})", now_unix - 20));
  ready.push_back(row(3, R"({"video":"a","rank":2})", now_unix - 10));
  std::vector<coalesced_row> merged;
  coalesce(ready, rule, merged);
  ASSERT_EQ(ready.size(), 2u);
  EXPECT_EQ(ready[0].id, 2);
  EXPECT_EQ(ready[1].id, 3);
  ASSERT_TRUE(ready[1].coalesced_since);
  EXPECT_DOUBLE_EQ(*ready[1].coalesced_since, now_unix - 30);
  ASSERT_EQ(merged.size(), 1u);
  EXPECT_EQ(merged[0].row.id, 1);
  EXPECT_EQ(merged[0].into, 3);
  EXPECT_DOUBLE_EQ(merged[0].since, now_unix - 30);

  // Nothing to merge: the queue is left as it was.
  merged.clear();
  coalesce(ready, rule, merged);
  EXPECT_TRUE(merged.empty());
  EXPECT_EQ(ready.size(), 2u);
}

}  // namespace
}  // namespace surge::engine
