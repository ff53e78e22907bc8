// What the storage thread tells an operator (engine/storage_thread/storage_notices.hpp): the
// lines name the rows and subscribers concerned, and what lists they hold is cut short.
#include "engine/storage_thread/storage_notices.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace surge::engine {
namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(StorageNotices, LostLeasesAreToldApartFromDeletedRows) {
  storage::write_report report;
  EXPECT_FALSE(notice::deleted_in_flight(report));
  EXPECT_FALSE(notice::leases_taken(report));
  // Every lost lease a deleted row: nothing was taken by another drainer.
  report.lost_leases = {4, 9};
  report.deleted = {4, 9};
  EXPECT_TRUE(has(*notice::deleted_in_flight(report), "2 rows (first id 4) were deleted"));
  EXPECT_FALSE(notice::leases_taken(report));
  // The first taken one is named, not the first lost.
  report.lost_leases = {4, 7, 9, 12};
  const auto taken = notice::leases_taken(report);
  ASSERT_TRUE(taken);
  EXPECT_TRUE(has(*taken, "lost the lease of 2 rows (first id 7)"));
}

TEST(StorageNotices, HeldSubscribersAreListedUpToTen) {
  EXPECT_TRUE(has(notice::subscribers_held({5}), "subscriber 5: the subscriber row is locked"));
  std::vector<std::int64_t> many;
  for (std::int64_t id = 1; id <= 12; ++id) many.push_back(id);
  const auto line = notice::subscribers_held(many);
  EXPECT_TRUE(has(line, "subscribers 1,2,3,4,5,6,7,8,9,10,...: "));
  EXPECT_FALSE(has(line, "11"));
}

TEST(StorageNotices, LinesNameTheRowsAndWhatToDo) {
  EXPECT_TRUE(has(notice::rows_held({8, 3}), "2 rows (first id 8) are locked"));
  EXPECT_TRUE(has(notice::key_stopped({.subscriber_id = 2, .key = "\"a\"", .delivery_id = 6}),
                  "subscriber 2: key \"a\" stopped: delivery 6 died"));
  EXPECT_TRUE(has(notice::dead_lettered(6, "why"), "row 6: why; dead-lettered"));
  EXPECT_TRUE(has(notice::quarantined(6, "why"), "row 6: why; even a dead-letter was refused"));
  EXPECT_TRUE(has(notice::ownership_lost({3, 1}), "lost ownership of 2 subscribers (first 3)"));
  EXPECT_TRUE(has(notice::bucket_repaired(4, "stamped ahead"), "repaired (stamped ahead)"));
  EXPECT_TRUE(has(notice::orphans_dead_lettered(3), "dead-lettered 3 rows of unknown"));
  const auto malformed =
      notice::malformed_dead_lettered({.next_attempt_at = 1, .locked_until = 2, .far_lease = 3});
  EXPECT_TRUE(has(malformed, "dead-lettered 6 rows"));
  EXPECT_TRUE(has(malformed, "beyond any lease: 3"));
}

}  // namespace
}  // namespace surge::engine
