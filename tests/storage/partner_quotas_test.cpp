// The partners' announced quotas through storage's door, on each kind of queue: what a drain
// records (drain_store::record_partner_quotas, the same statements) and `surge stats` reads, one
// row per subscriber, the latest kept.
#include "storage/partner_quotas.hpp"

#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "storage/connection.hpp"
#include "storage/schema.hpp"
#include "tests/storage/queue_kinds.hpp"
#include "tests/support/postgres_server.hpp"
#include "tests/support/seed001_ddl.hpp"
#include "tests/support/temp_dir.hpp"

namespace surge::storage {
namespace {

using kind = testing::queue_kind;

class PartnerQuotasOn : public ::testing::TestWithParam<kind> {};

TEST_P(PartnerQuotasOn, EachSubscriberKeepsItsLatestRow) {
  surge::testing::temp_dir dir;
  std::optional<connection> db;
  if (GetParam() == kind::postgres) {
    SURGE_REQUIRE_POSTGRES(server);
    db.emplace(connection_config{.location = server->create_database()});
  } else if (GetParam() == kind::seed001) {
    {
      SQLite::Database raw(dir.file("seed001.db"), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
      raw.exec(surge::testing::seed001_ddl);
    }
    db.emplace(connection_config{.location = dir.file("seed001.db"), .create_if_missing = false});
  } else {
    db.emplace(connection_config{.location = dir.file("queue.db")});
  }
  migrate(*db, GetParam() != kind::seed001);
  EXPECT_TRUE(load_partner_quotas(*db).empty());

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
  const partner_quota_row x{.subscriber_id = 3,
                            .form = "x-ratelimit",
                            .remaining = 7,
                            .reset_at = 2000,
                            .seen_at = 996,
                            .paced_rate = 50,
                            .paced_burst = 5};
  const partner_quota_row first[] = {draft, x};
  record_partner_quotas(*db, first);
  draft.remaining = 39;
  draft.seen_at = 995.1;
  const partner_quota_row later[] = {draft};
  record_partner_quotas(*db, later);

  const auto rows = load_partner_quotas(*db);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].subscriber_id, 2);
  EXPECT_EQ(rows[0].form, "ratelimit");
  EXPECT_EQ(rows[0].remaining, 39) << "the later announcement replaced the first";
  EXPECT_EQ(rows[0].quota, 100);
  EXPECT_EQ(rows[0].window_seconds, 10.0);
  EXPECT_DOUBLE_EQ(rows[0].seen_at, 995.1);
  EXPECT_DOUBLE_EQ(rows[0].paced_rate, 7.8);
  EXPECT_DOUBLE_EQ(rows[0].paced_until, 1000.5);
  EXPECT_EQ(rows[1].subscriber_id, 3);
  EXPECT_EQ(rows[1].form, "x-ratelimit");
  EXPECT_FALSE(rows[1].quota.has_value());
  EXPECT_FALSE(rows[1].window_seconds.has_value());
  EXPECT_EQ(rows[1].paced_until, 0);
}

INSTANTIATE_TEST_SUITE_P(Kinds, PartnerQuotasOn, testing::all_queue_kinds(),
                         testing::queue_kind_name);

}  // namespace
}  // namespace surge::storage
