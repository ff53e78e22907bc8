#include "engine/limits/token_bucket.hpp"

#include <algorithm>
#include <cmath>

#include "proto/persisted_bucket.hpp"

namespace surge::engine {

namespace {
double capacity_for(double burst) { return std::max(1.0, burst); }
}  // namespace

token_bucket::token_bucket(double rate_per_sec, double burst, double initial_tokens, time_point now)
    : rate_(rate_per_sec),
      capacity_(capacity_for(burst)),
      tokens_(std::clamp(initial_tokens, 0.0, capacity_for(burst))),
      updated_(now) {}

double token_bucket::tokens_at(time_point t) const {
  if (rate_ <= 0 || t <= updated_) return tokens_;
  const double elapsed = std::chrono::duration<double>(t - updated_).count();
  return std::min(capacity_, tokens_ + elapsed * rate_);
}

void token_bucket::refill(time_point now) {
  if (now <= updated_) return;
  tokens_ = tokens_at(now);
  updated_ = now;
}

bool token_bucket::try_take(time_point now) {
  if (rate_ <= 0 || tokens_at(now) < 1.0) return false;
  refill(now);
  tokens_ -= 1.0;
  return true;
}

token_bucket::duration token_bucket::time_until_available(time_point now) const {
  if (rate_ <= 0) return duration::max();
  const double missing = 1.0 - tokens_at(now);
  if (missing <= 0) return duration::zero();
  // Round up so that waking at now + result always finds a whole token.
  const auto wait = std::chrono::duration<double>(missing / rate_);
  return std::chrono::ceil<duration>(wait) + duration(1);
}

void token_bucket::reconfigure(double rate_per_sec, double burst, time_point now) {
  refill(now);
  rate_ = rate_per_sec;
  capacity_ = capacity_for(burst);
  tokens_ = std::min(tokens_, capacity_);
  if (now > updated_) updated_ = now;
}

void token_bucket::empty(time_point now) {
  refill(now);
  tokens_ = 0;
}

void token_bucket::at_most(double tokens, time_point now) {
  refill(now);
  tokens_ = std::clamp(tokens_, 0.0, std::max(0.0, tokens));
}

double seeded_tokens(double persisted_tokens, double persisted_at_unix, double rate_per_sec,
                     double burst, double now_unix) {
  const proto::persisted_bucket persisted{.tokens = persisted_tokens,
                                          .updated_at = persisted_at_unix,
                                          .rate = rate_per_sec,
                                          .burst = burst};
  const auto trusted = proto::repaired(persisted, now_unix).bucket;
  return std::clamp(proto::tokens_at(trusted, now_unix), 0.0, capacity_for(burst));
}

}  // namespace surge::engine
