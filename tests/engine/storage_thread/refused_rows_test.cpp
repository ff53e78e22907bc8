// What becomes of a row whose outcome the database refused
// (engine/storage_thread/refused_rows.hpp).
#include "engine/storage_thread/refused_rows.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace surge::engine {
namespace {

using storage::outcome_kind;

TEST(RefusedRows, TheReasonNamesTheRefusalAndIsKeptShort) {
  EXPECT_EQ(refused_rows::reason("CHECK constraint failed"),
            "the database refused this row's outcome: CHECK constraint failed");
  const auto long_reason = refused_rows::reason(std::string(1000, 'x'));
  EXPECT_EQ(long_reason.size(), 303U);
  EXPECT_TRUE(long_reason.ends_with("x..."));
}

TEST(RefusedRows, ARefusedDeliveryOrRetryIsDeadLetteredWithTheReason) {
  for (const auto kind : {outcome_kind::done, outcome_kind::retry}) {
    const storage::outcome refused{.delivery_id = 7, .lease = 12.5, .kind = kind, .attempts = 3};
    const auto dead = refused_rows::dead_letter(refused, "why");
    ASSERT_TRUE(dead);
    EXPECT_EQ(dead->kind, outcome_kind::dead);
    EXPECT_EQ(dead->last_error, "why");
    // Fenced on the same lease, with the same attempts.
    EXPECT_EQ(dead->delivery_id, 7);
    EXPECT_EQ(dead->lease, 12.5);
    EXPECT_EQ(dead->attempts, 3);
  }
}

TEST(RefusedRows, ARefusedDeadLetterOrReleaseHasNoDeadLetterToTry) {
  for (const auto kind : {outcome_kind::dead, outcome_kind::release}) {
    EXPECT_FALSE(refused_rows::dead_letter({.delivery_id = 7, .kind = kind}, "why"));
  }
}

TEST(RefusedRows, QuarantinedRowsAreDroppedFromClaimsAndNotWaitedFor) {
  refused_rows refused;
  std::vector<storage::claimed_row> rows(4);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i].id = static_cast<std::int64_t>(i + 1);
  refused.drop_from(rows);
  EXPECT_EQ(rows.size(), 4U);
  EXPECT_EQ(refused.finishable(10), 10);

  refused.quarantine(2, "refused twice");
  refused.quarantine(4, "refused twice");
  refused.drop_from(rows);
  ASSERT_EQ(rows.size(), 2U);
  EXPECT_EQ(rows[0].id, 1);
  EXPECT_EQ(rows[1].id, 3);
  EXPECT_EQ(refused.finishable(10), 8);
  EXPECT_EQ(refused.finishable(1), 0);
  EXPECT_EQ(refused.quarantined().at(2), "refused twice");
}

}  // namespace
}  // namespace surge::engine
