#include "engine/limits/partner_quota.hpp"

#include <algorithm>

namespace surge::engine {

namespace {

using std::chrono::seconds;

constexpr auto same_window_slack = seconds(1);

bool same_window(const proto::announced_quota& before, const proto::announced_quota& now_said,
                 partner_quota::time_point now) {
  // A policy alone counts nothing down: its window always starts at the answer.
  if (before.form == proto::quota_form::ratelimit_policy ||
      now_said.form == proto::quota_form::ratelimit_policy) {
    return false;
  }
  return now < before.reset_at && now_said.reset_at < before.reset_at + same_window_slack;
}

}  // namespace

std::optional<proto::announced_pace> partner_quota::on_response(
    const std::optional<proto::announced_quota>& announced, int others_in_flight,
    std::optional<seconds> retry_after, proto::configured_limit configured, time_point now) {
  if (!announced) return std::nullopt;
  proto::announced_quota kept = *announced;
  if (latest_ && same_window(*latest_, kept, now)) {
    kept.remaining = std::min(kept.remaining, latest_->remaining);
    kept.reset_at = std::min(kept.reset_at, latest_->reset_at);
    if (!kept.limit) kept.limit = latest_->limit;
    if (!kept.window) kept.window = latest_->window;
  }
  kept.reset_after = std::max(seconds(0), std::chrono::ceil<seconds>(kept.reset_at - now));
  latest_ = kept;
  seen_at_ = now;

  proto::announced_quota spendable = kept;
  const auto in_flight = static_cast<std::uint64_t>(std::max(0, others_in_flight));
  spendable.remaining = kept.remaining > in_flight ? kept.remaining - in_flight : 0;
  pace_ = proto::pace_for_quota(configured, spendable, retry_after, now);
  return pace_;
}

}  // namespace surge::engine
