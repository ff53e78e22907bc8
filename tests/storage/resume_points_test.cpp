// storage/resume_points: where a subscriber's next seek starts, decided on a clock passed in.
#include "storage/resume_points.hpp"

#include <gtest/gtest.h>

namespace surge::storage {
namespace {

TEST(ResumePoints, AFullClaimMovesTheNextSeekPastItsLastRow) {
  resume_points points;
  EXPECT_EQ(points.at(7, 100).id, 0) << "no point: from the start";
  points.after_claim(7, 16, 16, {.next_attempt_at = 50, .id = 900}, 100);
  EXPECT_EQ(points.at(7, 100.1).id, 900);
  EXPECT_EQ(points.at(7, 100.1).next_attempt_at, 50);
  points.after_claim(7, 16, 16, {.next_attempt_at = 51, .id = 1900}, 100.5);
  EXPECT_EQ(points.at(7, 100.6).id, 1900);
  EXPECT_EQ(points.at(8, 100.6).id, 0) << "each subscriber its own";
}

TEST(ResumePoints, AShortClaimStartsTheNextSeekFromTheBeginning) {
  resume_points points;
  points.after_claim(7, 16, 16, {.next_attempt_at = 50, .id = 900}, 100);
  points.after_claim(7, 16, 3, {.next_attempt_at = 50, .id = 950}, 100.2);
  EXPECT_EQ(points.at(7, 100.3).id, 0) << "the backlog ahead ran out: look behind as well";
  points.after_claim(7, 16, 0, {}, 100.4);
  EXPECT_EQ(points.at(7, 100.5).id, 0);
}

// A row can fall due behind the point (a retry, an expired lease): once a second the seek
// starts from the beginning, however the claims go.
TEST(ResumePoints, EverySecondTheSeekStartsFromTheBeginningOnce) {
  resume_points points;
  points.after_claim(7, 16, 16, {.next_attempt_at = 50, .id = 900}, 100);
  points.after_claim(7, 16, 16, {.next_attempt_at = 50, .id = 1000}, 100.9);
  EXPECT_EQ(points.at(7, 100.95).id, 1000);
  EXPECT_EQ(points.at(7, 101.0).id, 0) << "a second after the point was set";
  points.after_claim(7, 16, 16, {.next_attempt_at = 50, .id = 1100}, 101.0);
  EXPECT_EQ(points.at(7, 101.1).id, 1100) << "and then it moves on again";
  EXPECT_EQ(points.at(7, 99).id, 0) << "a clock stepped back: from the beginning";
}

}  // namespace
}  // namespace surge::storage
