#include "engine/limits/token_allowance.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

namespace surge::engine {

bool token_allowance::would_ask(double rate, clock::time_point now, double sendable_now) const {
  if (rate <= 0 || asked_ || now < next_ask_at_) return false;
  if (shared_) return std::floor(sendable_now) >= 1 && tokens_ < std::floor(sendable_now);
  const double low_water = std::max(1.0, rate * ahead_seconds());
  return tokens_ < low_water;
}

double token_allowance::ask(double rate, clock::time_point now, double sendable_now) {
  if (!would_ask(rate, now, sendable_now)) return 0;
  const double lease = std::max(1.0, rate * config_.lease_seconds);
  const double want = shared_ ? std::floor(sendable_now) - std::floor(tokens_)
                              : std::ceil(std::max(1.0, lease - tokens_));
  asked_ = true;
  asked_at_ = now;
  return want;
}

void token_allowance::granted(double tokens, clock::time_point now, clock::duration next_token_in,
                              bool shared) {
  shared_ = shared;
  if (asked_) {
    const double round_trip = std::chrono::duration<double>(now - asked_at_).count();
    round_trip_seconds_ = std::max(round_trip, 0.75 * round_trip_seconds_);
  }
  asked_ = false;
  tokens_ += std::max(0.0, tokens);
  if (tokens > 0) {
    next_ask_at_ = now;
    last_used_ = now;
  } else {
    next_ask_at_ = now + std::min<clock::duration>(next_token_in, config_.paused_recheck);
  }
}

double token_allowance::ahead_seconds() const {
  return std::max(config_.ask_ahead_seconds,
                  std::min(config_.lease_seconds / 2, 1.5 * round_trip_seconds_));
}

double token_allowance::take_stale(clock::time_point now) {
  if (tokens_ <= 0 || asked_) return 0;
  const auto lease = std::chrono::duration<double>(config_.lease_seconds);
  if (now - last_used_ < std::chrono::duration_cast<clock::duration>(lease)) return 0;
  return std::exchange(tokens_, 0.0);
}

double token_allowance::take_unspent() { return std::exchange(tokens_, 0.0); }

}  // namespace surge::engine
