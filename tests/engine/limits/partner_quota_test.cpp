// A partner's announced quota over several responses, on a simulated clock: what is kept between
// responses, and a whole drain's worth of windows against a partner that refuses beyond its quota.
#include "engine/limits/partner_quota.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "engine/limits/token_bucket.hpp"

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using sys = std::chrono::system_clock;

const sys::time_point t0 = sys::time_point(std::chrono::seconds(1'800'000'000));

proto::announced_quota quota(std::uint64_t remaining, sys::time_point reset_at,
                             sys::time_point now) {
  proto::announced_quota q;
  q.remaining = remaining;
  q.reset_at = reset_at;
  q.reset_after = std::chrono::ceil<std::chrono::seconds>(reset_at - now);
  return q;
}

const proto::configured_limit fast{.rate = 50, .burst = 5};

TEST(PartnerQuota, NothingAnnouncedChangesNothing) {
  partner_quota kept;
  EXPECT_FALSE(kept.on_response(std::nullopt, 0, std::nullopt, fast, t0).has_value());
  EXPECT_FALSE(kept.latest().has_value());
}

TEST(PartnerQuota, AQuotaTheConfiguredLimitFitsChangesNothing) {
  partner_quota kept;
  const auto pace = kept.on_response(quota(1000, t0 + 10s, t0), 0, std::nullopt, fast, t0);
  ASSERT_TRUE(pace.has_value());
  EXPECT_EQ(pace->kind, proto::pace_kind::configured);
  EXPECT_EQ(pace->rate, 50);
  EXPECT_EQ(pace->burst, 5);
}

TEST(PartnerQuota, ASmallerQuotaSpreadsWhatIsLeftUntilTheReset) {
  partner_quota kept;
  const auto pace = kept.on_response(quota(101, t0 + 10s, t0), 0, std::nullopt, fast, t0);
  ASSERT_TRUE(pace.has_value());
  EXPECT_EQ(pace->kind, proto::pace_kind::reduced);
  EXPECT_DOUBLE_EQ(pace->rate, 10.0);
  EXPECT_EQ(pace->burst, 1);
  EXPECT_EQ(pace->until, t0 + 10s);
}

TEST(PartnerQuota, WithinAWindowTheLowerCountAndTheEarlierResetAreKept) {
  partner_quota kept;
  kept.on_response(quota(50, t0 + 10s, t0), 0, std::nullopt, fast, t0);
  // Answered later but counted earlier (another connection), and its seconds rounded up.
  const auto pace =
      kept.on_response(quota(60, t0 + 10s + 700ms, t0 + 100ms), 0, std::nullopt, fast, t0 + 100ms);
  ASSERT_TRUE(pace.has_value());
  EXPECT_EQ(kept.latest()->remaining, 50u);
  EXPECT_EQ(kept.latest()->reset_at, t0 + 10s);
  // A rounder reset, just before the one kept, is the better estimate.
  kept.on_response(quota(49, t0 + 9s + 200ms, t0 + 200ms), 0, std::nullopt, fast, t0 + 200ms);
  EXPECT_EQ(kept.latest()->reset_at, t0 + 9s + 200ms);
  EXPECT_EQ(kept.latest()->remaining, 49u);
}

TEST(PartnerQuota, ANewWindowReplacesTheOld) {
  partner_quota kept;
  kept.on_response(quota(3, t0 + 2s, t0), 0, std::nullopt, fast, t0);
  // Past the reset: whatever it says now is the new window's.
  kept.on_response(quota(99, t0 + 12s, t0 + 2s), 0, std::nullopt, fast, t0 + 2s);
  EXPECT_EQ(kept.latest()->remaining, 99u);
  EXPECT_EQ(kept.latest()->reset_at, t0 + 12s);
  // Before the reset, a reset a window later is a new window too (the old one ended early).
  partner_quota early;
  early.on_response(quota(3, t0 + 2s, t0), 0, std::nullopt, fast, t0);
  early.on_response(quota(99, t0 + 11s + 500ms, t0 + 1500ms), 0, std::nullopt, fast, t0 + 1500ms);
  EXPECT_EQ(early.latest()->remaining, 99u);
}

TEST(PartnerQuota, APolicyAloneIsAWholeWindowFromEachAnswer) {
  partner_quota kept;
  auto policy = quota(100, t0 + 10s, t0);
  policy.form = proto::quota_form::ratelimit_policy;
  kept.on_response(policy, 0, std::nullopt, fast, t0);
  // Seven seconds on, the same policy again: 100 over the next 10 s, not over the 3 s left of the
  // first answer's window.
  auto again = quota(100, t0 + 17s, t0 + 7s);
  again.form = proto::quota_form::ratelimit_policy;
  const auto pace = kept.on_response(again, 0, std::nullopt, fast, t0 + 7s);
  ASSERT_TRUE(pace.has_value());
  EXPECT_EQ(kept.latest()->reset_at, t0 + 17s);
  EXPECT_EQ(pace->kind, proto::pace_kind::reduced);
  EXPECT_DOUBLE_EQ(pace->rate, 9.9);
  EXPECT_EQ(pace->until, t0 + 17s);
}

TEST(PartnerQuota, RequestsStillOnTheirWayAreTakenFromWhatIsLeft) {
  partner_quota kept;
  // Two units left, two more of ours in flight: nothing may go until the reset.
  const auto pace = kept.on_response(quota(2, t0 + 5s, t0), 2, std::nullopt, fast, t0);
  ASSERT_TRUE(pace.has_value());
  EXPECT_EQ(pace->kind, proto::pace_kind::paused);
  EXPECT_EQ(pace->until, t0 + 5s);
  EXPECT_EQ(kept.latest()->remaining, 2u) << "the partner's count is kept as it said it";
}

TEST(PartnerQuota, RetryAfterDecidesWhenAndTheQuotaPacesWhatIsLeftAfterIt) {
  partner_quota kept;
  // 429 with Retry-After 4 s, 31 units over the 10 s: 30 evenly over the 6 s after the pause.
  const auto pace = kept.on_response(quota(31, t0 + 10s, t0), 0, 4s, fast, t0);
  ASSERT_TRUE(pace.has_value());
  EXPECT_EQ(pace->kind, proto::pace_kind::reduced);
  EXPECT_DOUBLE_EQ(pace->rate, 5.0);
  // A window that ends before Retry-After does changes nothing.
  partner_quota short_window;
  const auto none = short_window.on_response(quota(0, t0 + 2s, t0), 0, 4s, fast, t0);
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->kind, proto::pace_kind::configured);
}

// ---- A drain's worth of windows on a simulated clock
// ---------------------------------------------

enum class announced_as { draft, x_epoch };

struct partner_run {
  int refused = 0;
  std::map<std::int64_t, int> accepted_per_window;
};

// A partner that takes `quota` requests per fixed window of `window_s` seconds (aligned to the
// clock, as most APIs count) and refuses the rest, announcing what is left on every answer: as
// the draft's `t` (seconds left, rounded up) or as the epoch of the reset. The subscriber is
// paced by a bucket at `configured`, lowered as partner_quota says, with `latency` between a
// request and its answer, one request in flight at a time.
partner_run run_against_partner(int quota_units, int window_s, announced_as form,
                                proto::configured_limit configured, std::chrono::seconds length,
                                std::chrono::microseconds latency,
                                std::chrono::milliseconds start) {
  using steady = std::chrono::steady_clock;
  const steady::time_point s0{};
  const auto wall = [&](steady::time_point t) {
    return t0 + std::chrono::duration_cast<sys::duration>(t - s0);
  };
  token_bucket bucket(configured.rate, configured.burst, configured.burst, s0 + start);
  partner_quota kept;
  // time_point::max(): no reduced limit in force; time_point::min(): no pause.
  auto limited_until = steady::time_point::max();
  auto paused_until = steady::time_point::min();
  partner_run run;
  std::map<std::int64_t, int> counted;
  const auto step = 500us;
  for (auto now = s0 + start; now < s0 + length; now += step) {
    if (now >= limited_until) {
      bucket.reconfigure(configured.rate, configured.burst, now);
      limited_until = steady::time_point::max();
    }
    if (now < paused_until) continue;
    if (!bucket.try_take(now)) continue;
    // The partner counts the request when it arrives and answers what is left after it.
    const auto arrival = wall(now + latency / 2);
    const double arrival_s = std::chrono::duration<double>(arrival.time_since_epoch()).count();
    const auto window = static_cast<std::int64_t>(std::floor(arrival_s / window_s));
    int& used = counted[window];
    if (used >= quota_units) {
      ++run.refused;
    } else {
      ++used;
      ++run.accepted_per_window[window];
    }
    const double window_end = static_cast<double>((window + 1) * window_s);
    const auto answered = now + latency;
    proto::quota_fields fields;
    const std::string remaining = std::to_string(quota_units - used);
    const std::string policy =
        "\"q\";q=" + std::to_string(quota_units) + ";w=" + std::to_string(window_s);
    const std::string item =
        "\"q\";r=" + remaining +
        ";t=" + std::to_string(static_cast<long long>(std::ceil(window_end - arrival_s)));
    const std::string reset = std::to_string(static_cast<long long>(window_end));
    if (form == announced_as::draft) {
      fields.add(proto::quota_field::ratelimit_policy, policy);
      fields.add(proto::quota_field::ratelimit, item);
    } else {
      fields.add(proto::quota_field::x_remaining, remaining);
      fields.add(proto::quota_field::x_reset, reset);
    }
    const auto announced = proto::parse_announced_quota(fields, wall(answered));
    const auto pace = kept.on_response(announced, 0, std::nullopt, configured, wall(answered));
    if (!pace) continue;
    const auto until =
        answered + std::chrono::duration_cast<steady::duration>(pace->until - wall(answered));
    switch (pace->kind) {
      case proto::pace_kind::configured:
        bucket.reconfigure(configured.rate, configured.burst, answered);
        limited_until = steady::time_point::max();
        break;
      case proto::pace_kind::reduced:
        bucket.reconfigure(pace->rate, pace->burst, answered);
        limited_until = until;
        break;
      case proto::pace_kind::paused:
        paused_until = until;
        bucket.reconfigure(configured.rate, configured.burst, answered);
        limited_until = steady::time_point::max();
        break;
    }
    now = answered;  // one in flight: the next request waits for this answer
  }
  return run;
}

void expect_quota_used(const partner_run& run, int quota_units, const std::string& label) {
  EXPECT_EQ(run.refused, 0) << label;
  // The first and the last window are partly outside the run.
  ASSERT_GE(run.accepted_per_window.size(), 4u) << label;
  auto it = std::next(run.accepted_per_window.begin());
  const auto end = std::prev(run.accepted_per_window.end());
  for (; it != end; ++it) {
    EXPECT_GE(it->second, std::ceil(0.95 * quota_units)) << label << ", window " << it->first;
    EXPECT_LE(it->second, quota_units) << label;
  }
}

TEST(PartnerQuota, AQuotaAnnouncedEitherWayIsUsedWithoutARefusal) {
  for (const auto form : {announced_as::draft, announced_as::x_epoch}) {
    for (const auto start : {0ms, 370ms, 999ms}) {
      const std::string label = std::string(form == announced_as::draft ? "draft" : "x-epoch") +
                                ", start +" + std::to_string(start.count()) + " ms";
      expect_quota_used(run_against_partner(100, 10, form, fast, 60s, 2ms, start), 100,
                        label + ", 100/10 s");
      expect_quota_used(run_against_partner(50, 5, form, fast, 40s, 2ms, start), 50,
                        label + ", 50/5 s");
    }
  }
}

TEST(PartnerQuota, AConfiguredLimitBelowTheQuotaIsKept) {
  // 5/s is below 100 per 10 s: the partner's announcement never raises it.
  const auto run =
      run_against_partner(100, 10, announced_as::draft, {.rate = 5, .burst = 2}, 40s, 2ms, 0ms);
  EXPECT_EQ(run.refused, 0);
  for (const auto& [window, accepted] : run.accepted_per_window) EXPECT_LE(accepted, 52);
}

}  // namespace
}  // namespace surge::engine
