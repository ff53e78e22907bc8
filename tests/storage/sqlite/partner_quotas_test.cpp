// The partners' announced quotas on a SQLite file migrated before their table existed (what each
// kind of queue records and reads: tests/storage/partner_quotas_test.cpp).
#include "storage/sqlite/partner_quotas.hpp"

#include <gtest/gtest.h>

#include "tests/storage/test_db.hpp"

namespace surge::storage::sqlite {
namespace {

TEST(PartnerQuotas, AFileNotMigratedThatFarHasNone) {
  testing::temp_dir dir;
  SQLite::Database db = testing::open_migrated(dir.file("queue.db"));
  db.exec("DROP TABLE surge_partner_quota");
  EXPECT_TRUE(load_partner_quotas(db).empty());
}

}  // namespace
}  // namespace surge::storage::sqlite
