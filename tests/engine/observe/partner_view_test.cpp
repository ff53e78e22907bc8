#include "engine/observe/partner_view.hpp"

#include <gtest/gtest.h>

namespace surge::engine {
namespace {

subscriber_snapshot sending(std::int64_t id, double limit, double achieved) {
  return {.id = id,
          .delivered = 100,
          .rate_limit = limit,
          .paced_rate = limit,
          .achieved_rate = achieved};
}

const partner_row& row_of(const std::vector<partner_row>& rows, std::int64_t id) {
  for (const auto& row : rows) {
    if (row.id == id) return row;
  }
  throw std::runtime_error("no row for subscriber " + std::to_string(id));
}

TEST(SmoothedRate, TakesTheFirstIntervalWholeThenSmoothsOverAboutTenSeconds) {
  smoothed_rate rate;
  rate.sample(0, 100);
  EXPECT_EQ(rate.value(), 0);
  rate.sample(50, 101);  // 50/s in the first second: no ramp up from zero
  EXPECT_DOUBLE_EQ(rate.value(), 50);
  rate.sample(50, 102);  // a second with nothing: a tenth of the way down
  EXPECT_DOUBLE_EQ(rate.value(), 45);
  rate.sample(50, 102);  // the same moment again changes nothing
  EXPECT_DOUBLE_EQ(rate.value(), 45);
  for (int t = 103; t < 200; ++t) rate.sample(50 + 20 * (t - 102), t);
  EXPECT_NEAR(rate.value(), 20, 0.01);
}

TEST(PartnerView, AtItsLimitSendingBelowItAndIdleAreToldApart) {
  partner_inputs in;
  in.subscribers = {sending(1, 10, 9.5), sending(2, 10, 3), sending(3, 10, 0)};
  in.queued = std::vector<queued_snapshot>{{.id = 1, .queued = 100}, {.id = 2, .queued = 30}};
  const auto rows = partner_rows(in);
  EXPECT_EQ(row_of(rows, 1).state, partner_state::at_limit);
  EXPECT_EQ(row_of(rows, 2).state, partner_state::sending);
  EXPECT_EQ(row_of(rows, 3).state, partner_state::idle);
  // The ETA takes the slower of the limit and what the partner takes.
  EXPECT_DOUBLE_EQ(*row_of(rows, 1).eta_seconds, 100 / 9.5);
  EXPECT_DOUBLE_EQ(*row_of(rows, 2).eta_seconds, 10);
  const auto totals = totals_of(rows);
  EXPECT_EQ(totals.backlog, 130);
  EXPECT_EQ(totals.held_rows, 0);
  EXPECT_DOUBLE_EQ(*totals.eta_seconds, 100 / 9.5);
}

TEST(PartnerView, HeldPartnersRowsAreApartFromTheBacklogAndOutOfTheEta) {
  partner_inputs in;
  in.subscribers = {sending(1, 10, 10), sending(2, 10, 0), sending(3, 10, 0)};
  in.subscribers[1].failed = 40;
  in.subscribers[1].last_error = "http 503";
  in.held = {{.id = 2, .kind = "circuit_open", .reason = "circuit open"},
             {.id = 3, .kind = "deactivated", .reason = "answered 410 Gone"},
             {.id = 4, .kind = "credentials", .reason = "unreadable key"}};
  in.queued = std::vector<queued_snapshot>{
      {.id = 1, .queued = 50}, {.id = 2, .queued = 598}, {.id = 3, .queued = 7}};
  const auto rows = partner_rows(in);
  // Unhappiest first; a held partner with nothing queued is still shown.
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].id, 4);
  EXPECT_EQ(rows[0].state, partner_state::credentials);
  EXPECT_EQ(rows[1].state, partner_state::deactivated);
  EXPECT_EQ(rows[2].state, partner_state::circuit_open);
  EXPECT_EQ(rows[2].last_error, "http 503");
  EXPECT_FALSE(rows[2].eta_seconds);
  EXPECT_EQ(rows[3].id, 1);
  const auto totals = totals_of(rows);
  EXPECT_EQ(totals.backlog, 50);
  EXPECT_EQ(totals.held_rows, 605);
  EXPECT_EQ(totals.held_partners, 2);
  EXPECT_DOUBLE_EQ(*totals.eta_seconds, 5);
}

TEST(PartnerView, SlowedQuotaPacedAndOpenCircuitsSayWhy) {
  partner_inputs in;
  auto slowed = sending(1, 30, 3.3);
  slowed.paced_rate = 3.3;
  slowed.slowed = true;
  auto paced = sending(2, 50, 9);
  paced.paced_rate = 10;
  paced.announced = announced_snapshot{.paced = true, .paced_rate = 10};
  auto open = sending(3, 10, 0);
  open.circuit_open_since_unix = 1000;
  in.subscribers = {slowed, paced, open};
  in.queued = std::vector<queued_snapshot>{
      {.id = 1, .queued = 33}, {.id = 2, .queued = 90}, {.id = 3, .queued = 5}};
  const auto rows = partner_rows(in);
  EXPECT_EQ(row_of(rows, 1).state, partner_state::slowed);
  EXPECT_EQ(row_of(rows, 1).reason, "429/503 answers: paced at 3.3/s of 30/s");
  EXPECT_DOUBLE_EQ(*row_of(rows, 1).eta_seconds, 10);
  EXPECT_EQ(row_of(rows, 2).state, partner_state::quota_paced);
  EXPECT_EQ(row_of(rows, 2).reason, "its announced quota allows 10/s of 50/s");
  EXPECT_EQ(row_of(rows, 3).state, partner_state::circuit_open);
  EXPECT_EQ(row_of(rows, 3).since_unix, 1000);
}

TEST(PartnerView, AFailingPartnerThatTakesNothingHasNoEtaAndNeitherHasTheDrain) {
  partner_inputs in;
  auto failing = sending(1, 10, 0);
  failing.failed = 8;
  in.subscribers = {failing, sending(2, 10, 10)};
  in.queued = std::vector<queued_snapshot>{{.id = 1, .queued = 10}, {.id = 2, .queued = 10}};
  const auto rows = partner_rows(in);
  EXPECT_FALSE(row_of(rows, 1).eta_seconds);
  EXPECT_FALSE(totals_of(rows).eta_seconds);
}

TEST(PartnerView, ABatchingPartnersLimitCountsRequestsOfSeveralRows) {
  partner_inputs in;
  auto batching = sending(1, 0.5, 0);
  batching.delivered = 0;
  batching.rows_per_request = 50;
  in.subscribers = {batching};
  in.queued = std::vector<queued_snapshot>{{.id = 1, .queued = 250}};
  const auto rows = partner_rows(in);
  EXPECT_DOUBLE_EQ(*row_of(rows, 1).eta_seconds, 10);  // 25 rows a second
}

TEST(PartnerView, QueuedRowsNoShardSendsAreHeldAsInactive) {
  partner_inputs in;
  auto disabled = sending(2, 10, 0);
  disabled.active = false;
  in.subscribers = {disabled};
  in.queued = std::vector<queued_snapshot>{{.id = 1, .queued = 4}, {.id = 2, .queued = 6}};
  const auto rows = partner_rows(in);
  EXPECT_EQ(row_of(rows, 1).state, partner_state::inactive);
  EXPECT_EQ(row_of(rows, 2).state, partner_state::inactive);
  EXPECT_EQ(row_of(rows, 2).reason, "disabled");
  EXPECT_EQ(totals_of(rows).held_rows, 10);
}

TEST(ClockText, MinutesSecondsAndHours) {
  EXPECT_EQ(clock_text(std::nullopt), "--:--");
  EXPECT_EQ(clock_text(42.4), "0:42");
  EXPECT_EQ(clock_text(725), "12:05");
  EXPECT_EQ(clock_text(10930), "3:02:10");
}

}  // namespace
}  // namespace surge::engine
