#include "engine/shard/subscriber_limits.hpp"

#include <algorithm>

namespace surge::engine {

namespace {

double seed_for(const storage::subscriber_row& row, double now_unix) {
  return seeded_tokens(row.tokens, row.tokens_updated_at, row.rate_per_sec,
                       static_cast<double>(row.burst), now_unix);
}

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

subscriber_limits::subscriber_limits(const storage::subscriber_row& row, double rate, double burst,
                                     steady::time_point now, double now_unix,
                                     const scheduler_config& config)
    : rate_(rate),
      burst_(burst),
      bucket_(row.rate_per_sec, static_cast<double>(row.burst), seed_for(row, now_unix), now),
      wire_(row.rate_per_sec, static_cast<double>(row.burst), seed_for(row, now_unix), now),
      allowance_(config.token_lease),
      pace_(row.rate_per_sec, config.adaptive) {}

bool subscriber_limits::configure(double rate, double burst, steady::time_point now) {
  rate_ = rate;
  burst_ = burst;
  pace_.reconfigure(rate);
  return apply(now);
}

bool subscriber_limits::on_endpoint(bool pushback, bool delivered, steady::time_point now) {
  const bool changed = pushback    ? pace_.on_pushback(now)
                       : delivered ? pace_.on_success(now)
                                   : false;
  return changed && apply(now);
}

bool subscriber_limits::apply(steady::time_point now) {
  double rate = rate_;
  double burst = burst_;
  if (announced_limit_) {
    // Only ever down: the partner cannot raise the configured limit.
    rate = std::min(rate, announced_limit_->rate);
    burst = std::min(burst, announced_limit_->burst);
  }
  bucket_.reconfigure(std::min(pace_.effective(), rate), burst, now);
  if (wire_.rate() == rate && wire_.burst() == std::max(1.0, burst)) return false;
  wire_.reconfigure(rate, burst, now);
  return true;
}

std::optional<subscriber_limits::announced_step> subscriber_limits::on_announced(
    const quota_lines& lines, int others_in_flight, std::optional<std::chrono::seconds> retry_after,
    wall::time_point said_at, steady::time_point now) {
  if (lines.empty()) return std::nullopt;
  const auto announced = proto::parse_announced_quota(to_quota_fields(lines), said_at);
  const auto pace =
      quota_.on_response(announced, others_in_flight, retry_after, {rate_, burst_}, said_at);
  if (!pace) return std::nullopt;
  unrecorded_ = true;
  announced_step step;
  step.kind = pace->kind;
  step.until = now + std::chrono::duration_cast<steady::duration>(pace->until - said_at);
  if (pace->kind == proto::pace_kind::reduced) {
    announced_limit_ = announced_limit{pace->rate, pace->burst, step.until};
  } else {
    // The configured limit fits, or the quota is spent and the caller pauses the subscriber.
    announced_limit_.reset();
  }
  if (!noted_ && pace->kind != proto::pace_kind::configured) {
    // Once per drain: a partner with a small quota would say it every window.
    noted_ = true;
    step.first_below_configured = true;
  }
  step.gate_changed = apply(now);
  return step;
}

bool subscriber_limits::expire_announced(steady::time_point now) {
  if (!announced_limit_ || now < announced_limit_->until) return false;
  // The window has reset: the configured limit applies again until the partner says otherwise.
  announced_limit_.reset();
  return apply(now);
}

std::optional<announced_snapshot> subscriber_limits::announced(wall::time_point now) const {
  const auto& latest = quota_.latest();
  if (!latest) return std::nullopt;
  announced_snapshot out;
  if (latest->limit) out.quota = static_cast<double>(*latest->limit);
  if (latest->window) out.window_seconds = static_cast<double>(latest->window->count());
  out.remaining = static_cast<double>(latest->remaining);
  out.reset_in = std::max(0.0, std::chrono::duration<double>(latest->reset_at - now).count());
  const auto& pace = quota_.pace();
  const bool in_force = pace.kind != proto::pace_kind::configured && pace.until > now;
  out.paced = in_force;
  out.paced_rate = in_force ? pace.rate : rate_;
  return out;
}

std::optional<storage::partner_quota_row> subscriber_limits::take_unrecorded(
    std::int64_t subscriber_id) {
  if (!unrecorded_) return std::nullopt;
  unrecorded_ = false;
  const auto& latest = quota_.latest();
  if (!latest) return std::nullopt;
  const auto& pace = quota_.pace();
  storage::partner_quota_row row;
  row.subscriber_id = subscriber_id;
  row.form = form_name(latest->form);
  if (latest->limit) row.quota = static_cast<std::int64_t>(*latest->limit);
  if (latest->window) row.window_seconds = static_cast<double>(latest->window->count());
  row.remaining = static_cast<std::int64_t>(latest->remaining);
  row.reset_at = unix_seconds(latest->reset_at);
  row.seen_at = unix_seconds(quota_.seen_at());
  const bool limited = pace.kind != proto::pace_kind::configured;
  row.paced_rate = limited ? pace.rate : rate_;
  row.paced_burst = limited ? pace.burst : burst_;
  row.paced_until = limited ? unix_seconds(pace.until) : 0;
  return row;
}

void subscriber_limits::pause(steady::time_point until, const char* reason) {
  if (until > paused_until_) {
    paused_until_ = until;
    pause_reason_ = reason;
  }
}

bool subscriber_limits::admit(steady::time_point now) {
  if (!allowance_.has_token()) return false;
  if (!bucket_.try_take(now)) return false;
  allowance_.spend(now);
  return true;
}

}  // namespace surge::engine
