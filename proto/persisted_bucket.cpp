#include "proto/persisted_bucket.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace surge::proto {

namespace {
double capacity_of(const persisted_bucket& bucket) { return std::max(1.0, bucket.burst); }
}  // namespace

bucket_repair repaired(const persisted_bucket& bucket, double now) {
  bucket_repair out{bucket, {}};
  auto& b = out.bucket;
  auto say = [&](const std::string& what) { out.why += (out.why.empty() ? "" : "; ") + what; };
  char text[96];
  if (!std::isfinite(b.updated_at)) {
    b.updated_at = now;
    say("its stamp is not a number");
  } else if (b.updated_at > now + bucket_clock_skew_seconds) {
    std::snprintf(text, sizeof text, "stamped %.0f s in the future", b.updated_at - now);
    say(text);
    b.updated_at = now;
  }
  const double deepest = capacity_of(b) + std::max(0.0, b.rate) * bucket_debt_seconds;
  if (!std::isfinite(b.tokens)) {
    b.tokens = capacity_of(b);
    say("its token count is not a number");
  } else if (b.tokens < -deepest) {
    std::snprintf(text, sizeof text, "a debt of %.0f tokens, deeper than any drainer reserves",
                  -b.tokens);
    say(text);
    b.tokens = 0;
  }
  return out;
}

double tokens_at(const persisted_bucket& bucket, double now) {
  const double capacity = capacity_of(bucket);
  if (!std::isfinite(bucket.tokens)) return capacity;
  const double elapsed = std::max(0.0, now - bucket.updated_at);
  const double refill = bucket.rate > 0 ? elapsed * bucket.rate : 0.0;
  return std::min(capacity, bucket.tokens + refill);
}

token_take take_tokens(const persisted_bucket& bucket, double want, double now,
                       double reserve_seconds) {
  token_take take;
  const double reserve = bucket.rate > 0 ? bucket.rate * std::max(0.0, reserve_seconds) : 0.0;
  const double there = tokens_at(bucket, now);
  const double whole = std::floor(std::max(0.0, there + reserve));
  take.taken = std::min(whole, std::ceil(std::max(0.0, want)));
  take.left = there - take.taken;
  if (take.taken == 0 && want > 0 && bucket.rate > 0) {
    take.next_token_at = now + (1.0 - there - reserve) / bucket.rate;  // nothing taken
  }
  return take;
}

double stamp_for_write(const persisted_bucket& bucket, double now) {
  return std::isfinite(bucket.updated_at) ? std::max(now, bucket.updated_at) : now;
}

double give_back(const persisted_bucket& bucket, double unspent, double now) {
  return std::min(capacity_of(bucket), tokens_at(bucket, now) + std::max(0.0, unspent));
}

}  // namespace surge::proto
