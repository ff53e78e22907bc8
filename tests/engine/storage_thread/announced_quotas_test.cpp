// The partners' announced quotas on their way to the database
// (engine/storage_thread/announced_quotas.hpp), on a simulated clock.
#include "engine/storage_thread/announced_quotas.hpp"

#include <chrono>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

storage::partner_quota_row quota(std::int64_t subscriber, std::int64_t remaining) {
  return {.subscriber_id = subscriber, .form = "ratelimit", .remaining = remaining};
}

std::vector<std::int64_t> remaining_of(std::span<const storage::partner_quota_row> rows) {
  std::vector<std::int64_t> out;
  for (const auto& row : rows) out.push_back(row.remaining);
  return out;
}

const steady::time_point start = steady::time_point{} + 1000s;

TEST(AnnouncedQuotas, OnlyTheLatestPerSubscriberIsWritten) {
  announced_quotas quotas(1s);
  quotas.announced({quota(2, 10), quota(1, 5)});
  quotas.announced({quota(2, 9), quota(1, 4), quota(2, 8)});
  const auto rows = quotas.take(start, false);
  ASSERT_EQ(rows.size(), 2U);
  EXPECT_EQ(rows[0].subscriber_id, 1);
  EXPECT_EQ(rows[1].subscriber_id, 2);
  EXPECT_EQ(remaining_of(rows), (std::vector<std::int64_t>{4, 8}));
  quotas.written();
  EXPECT_FALSE(quotas.any());
}

TEST(AnnouncedQuotas, WrittenAtMostOncePerInterval) {
  announced_quotas quotas(1s);
  EXPECT_FALSE(quotas.due(start));  // nothing announced
  quotas.announced({quota(1, 5)});
  EXPECT_TRUE(quotas.due(start));
  (void)quotas.take(start, false);
  quotas.written();
  quotas.announced({quota(1, 4)});
  EXPECT_FALSE(quotas.due(start + 999ms));
  EXPECT_TRUE(quotas.due(start + 1s));
}

TEST(AnnouncedQuotas, ARefusedWriteIsKeptUnlessANewerAnnouncementReplacesIt) {
  announced_quotas quotas(1s);
  quotas.announced({quota(1, 5), quota(2, 7)});
  (void)quotas.take(start, false);
  quotas.announced({quota(2, 6)});  // while the write was on its way
  quotas.failed();
  EXPECT_TRUE(quotas.any());
  EXPECT_EQ(remaining_of(quotas.take(start + 1s, false)), (std::vector<std::int64_t>{5, 6}));
}

TEST(AnnouncedQuotas, TheLastWriteIsDroppedIfRefused) {
  announced_quotas quotas(1s);
  quotas.announced({quota(1, 5)});
  (void)quotas.take(start, true);
  quotas.failed();
  EXPECT_FALSE(quotas.any());
}

}  // namespace
}  // namespace surge::engine
