// What a partner's announced quota (RateLimit / X-RateLimit-* in its responses) does to its
// subscriber on the shard: the pace engine/limits/partner_quota draws from it is applied until the
// window resets, and the latest announcement goes to the metrics and, through the storage
// thread, to `surge stats`.
#include "engine/shard/core.hpp"

#include <algorithm>

#include "proto/outcome.hpp"
#include "proto/retry_after.hpp"

namespace surge::engine {

namespace {

double unix_seconds(std::chrono::system_clock::time_point at) {
  return std::chrono::duration<double>(at.time_since_epoch()).count();
}

const char* form_name(proto::quota_form form) {
  switch (form) {
    case proto::quota_form::ratelimit: return "ratelimit";
    case proto::quota_form::ratelimit_policy: return "ratelimit-policy";
    case proto::quota_form::x_ratelimit: return "x-ratelimit";
  }
  return "ratelimit";
}

}  // namespace

void shard_core::observe_quota(subscriber_state& sub, const http_result& result,
                               const attempt_times& times) {
  if (result.quota.empty()) return;
  const auto fields = to_quota_fields(result.quota);
  const auto announced = proto::parse_announced_quota(fields, times.now);
  // Retry-After wins where it is honoured (429, 503): the quota only paces what is left of its
  // window after it.
  std::optional<std::chrono::seconds> retry_after;
  if (proto::asks_to_slow_down(result.status) && !result.retry_after.empty()) {
    retry_after = proto::parse_retry_after(result.retry_after, times.now, config_.retry_after_cap);
  }
  // This attempt still counts in in_flight: the others are what the partner may not have seen.
  const auto pace = sub.quota.on_response(announced, sub.in_flight - 1, retry_after,
                                          {sub.settings.rate, sub.settings.burst}, times.now);
  if (!pace) return;
  sub.quota_unrecorded = true;
  const auto now = now_.steady;
  const auto until = now + std::chrono::duration_cast<steady::duration>(pace->until - times.now);
  switch (pace->kind) {
    case proto::pace_kind::configured: sub.quota_limit.reset(); break;
    case proto::pace_kind::reduced:
      sub.quota_limit = subscriber_state::announced_limit{pace->rate, pace->burst, until};
      break;
    case proto::pace_kind::paused:
      sub.quota_limit.reset();
      pause_subscriber(sub, until - now, times.finished_unix,
                       "subscriber paused until its partner's announced quota resets");
      break;
  }
  if (!sub.quota_noted && pace->kind != proto::pace_kind::configured) {
    // Once per drain: a partner with a small quota would say it every window.
    sub.quota_noted = true;
    inform("subscriber " + std::to_string(sub.settings.id) + ": its partner announces " +
           std::to_string(sub.quota.latest()->remaining) + " requests left for " +
           std::to_string(sub.quota.latest()->reset_after.count()) +
           " s; paced below the configured limit until its window resets (surge stats shows "
           "the latest)");
  }
  apply_limits(sub);
}

void shard_core::expire_quota_limit(subscriber_state& sub) {
  if (!sub.quota_limit || now_.steady < sub.quota_limit->until) return;
  // The window has reset: the configured limit applies again until the partner says otherwise.
  sub.quota_limit.reset();
  apply_limits(sub);
}

void shard_core::pause_subscriber(subscriber_state& sub, steady::duration pause, double now_unix,
                                  const char* reason) {
  if (now_.steady + pause > sub.paused_until) sub.pause_reason = reason;
  sub.paused_until = std::max(sub.paused_until, now_.steady + pause);
  notify_line(sub);
  demand_.poll_no_earlier(sub, sub.paused_until);
  if (pause >= config_.scheduler.pause_release_threshold) {
    reschedule_ready(sub, now_unix + std::chrono::duration<double>(pause).count(), reason);
  }
}

std::optional<announced_snapshot> shard_core::announced_of(
    const subscriber_state& sub, std::chrono::system_clock::time_point now) {
  const auto& latest = sub.quota.latest();
  if (!latest) return std::nullopt;
  announced_snapshot out;
  if (latest->limit) out.quota = static_cast<double>(*latest->limit);
  if (latest->window) out.window_seconds = static_cast<double>(latest->window->count());
  out.remaining = static_cast<double>(latest->remaining);
  out.reset_in = std::max(0.0, std::chrono::duration<double>(latest->reset_at - now).count());
  const auto& pace = sub.quota.pace();
  const bool in_force = pace.kind != proto::pace_kind::configured && pace.until > now;
  out.paced = in_force;
  out.paced_rate = in_force ? pace.rate : sub.settings.rate;
  return out;
}

void shard_core::hand_over_quotas() {
  for (auto* sub : demand_.scan_order()) {
    if (!sub->quota_unrecorded) continue;
    sub->quota_unrecorded = false;
    const auto& latest = sub->quota.latest();
    if (!latest) continue;
    const auto& pace = sub->quota.pace();
    auto& row = out_.quotas.emplace_back();
    row.subscriber_id = sub->settings.id;
    row.form = form_name(latest->form);
    if (latest->limit) row.quota = static_cast<std::int64_t>(*latest->limit);
    if (latest->window) row.window_seconds = static_cast<double>(latest->window->count());
    row.remaining = static_cast<std::int64_t>(latest->remaining);
    row.reset_at = unix_seconds(latest->reset_at);
    row.seen_at = unix_seconds(sub->quota.seen_at());
    const bool limited = pace.kind != proto::pace_kind::configured;
    row.paced_rate = limited ? pace.rate : sub->settings.rate;
    row.paced_burst = limited ? pace.burst : sub->settings.burst;
    row.paced_until = limited ? unix_seconds(pace.until) : 0;
  }
}

}  // namespace surge::engine
