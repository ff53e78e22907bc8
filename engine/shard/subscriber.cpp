#include "engine/shard/subscriber.hpp"

#include <algorithm>

namespace surge::engine {

namespace {
double seed_for(const storage::subscriber_row& row, double now_unix) {
  return seeded_tokens(row.tokens, row.tokens_updated_at, row.rate_per_sec,
                       static_cast<double>(row.burst), now_unix);
}
}  // namespace

subscriber_state::subscriber_state(const storage::subscriber_row& row, subscriber_settings derived,
                                   std::chrono::steady_clock::time_point now, double now_unix,
                                   const scheduler_config& config)
    : settings(std::move(derived)),
      bucket(row.rate_per_sec, static_cast<double>(row.burst), seed_for(row, now_unix), now),
      wire(row.rate_per_sec, static_cast<double>(row.burst), seed_for(row, now_unix), now),
      allowance(config.token_lease),
      pace(row.rate_per_sec, config.adaptive),
      breaker(config.circuit) {}

bool subscriber_state::apply_limits(std::chrono::steady_clock::time_point now) {
  double rate = settings.rate;
  double burst = settings.burst;
  if (quota_limit) {
    // Only ever down: the partner cannot raise the configured limit.
    rate = std::min(rate, quota_limit->rate);
    burst = std::min(burst, quota_limit->burst);
  }
  bucket.reconfigure(std::min(pace.effective(), rate), burst, now);
  if (wire.rate() == rate && wire.burst() == std::max(1.0, burst)) return false;
  wire.reconfigure(rate, burst, now);
  return true;
}

}  // namespace surge::engine
