// The partners' announced quotas as a drain records them and `surge stats` reads them.
#include "storage/sqlite/partner_quotas.hpp"

#include <gtest/gtest.h>

#include "tests/storage/test_db.hpp"

namespace surge::storage::sqlite {
namespace {

TEST(PartnerQuotas, EachSubscriberKeepsItsLatestRow) {
  testing::temp_dir dir;
  SQLite::Database db = testing::open_migrated(dir.file("queue.db"));
  EXPECT_TRUE(load_partner_quotas(db).empty());

  partner_quota_row draft{.subscriber_id = 2,
                          .form = "ratelimit",
                          .quota = 100,
                          .window_seconds = 10,
                          .remaining = 40,
                          .reset_at = 1000.5,
                          .seen_at = 995,
                          .paced_rate = 7.8,
                          .paced_burst = 1,
                          .paced_until = 1000.5};
  partner_quota_row x{.subscriber_id = 3,
                      .form = "x-ratelimit",
                      .remaining = 7,
                      .reset_at = 2000,
                      .seen_at = 996,
                      .paced_rate = 50,
                      .paced_burst = 5};
  const partner_quota_row first[] = {draft, x};
  record_partner_quotas(db, first);
  draft.remaining = 39;
  draft.seen_at = 995.1;
  const partner_quota_row later[] = {draft};
  record_partner_quotas(db, later);

  const auto rows = load_partner_quotas(db);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].subscriber_id, 2);
  EXPECT_EQ(rows[0].remaining, 39);
  EXPECT_EQ(rows[0].quota, 100);
  EXPECT_EQ(rows[0].window_seconds, 10.0);
  EXPECT_DOUBLE_EQ(rows[0].paced_until, 1000.5);
  EXPECT_EQ(rows[1].form, "x-ratelimit");
  EXPECT_FALSE(rows[1].quota.has_value());
  EXPECT_FALSE(rows[1].window_seconds.has_value());
  EXPECT_EQ(rows[1].paced_until, 0);
}

TEST(PartnerQuotas, AFileNotMigratedThatFarHasNone) {
  testing::temp_dir dir;
  SQLite::Database db = testing::open_migrated(dir.file("queue.db"));
  db.exec("DROP TABLE surge_partner_quota");
  EXPECT_TRUE(load_partner_quotas(db).empty());
}

}  // namespace
}  // namespace surge::storage::sqlite
