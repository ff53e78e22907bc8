#pragma once
// Backoff and give-up rules for failed deliveries.
#include <chrono>

namespace surge::proto {

// How the delay after the n-th counted failure is drawn from `unit_random` in [0, 1).
enum class backoff_rule {
  // base × 2^(n−1), capped, then uniform between half and all of it: Surge's own rule.
  equal_jitter,
  // min(cap, base × 2^n + uniform 0..added_jitter): the rule the second published queue shape
  // gives its own worker (base 1 s, jitter 30 s, cap 1 h).
  added_jitter,
};

struct retry_config {
  backoff_rule rule = backoff_rule::equal_jitter;
  std::chrono::milliseconds added_jitter{0};  // added_jitter only
  std::chrono::milliseconds base_delay{std::chrono::seconds(1)};
  std::chrono::milliseconds max_delay{std::chrono::hours(1)};
  int max_attempts = 8;
  std::chrono::seconds max_age{std::chrono::hours(24)};
  // A 429 normally uses up no attempt, but one without a usable Retry-After names no end: after
  // this many of those in a row from one subscriber, its 429s count as attempts, so the attempt
  // limit ends a partner that refuses for ever.
  int max_unpaid_rate_limits = 10;

  friend bool operator==(const retry_config&, const retry_config&) = default;
};

class retry_policy {
 public:
  explicit retry_policy(retry_config config = {}) : config_(config) {}

  const retry_config& config() const { return config_; }

  // The nominal delay after `failed_attempts` failures: base * 2^(failed_attempts - 1), capped.
  std::chrono::milliseconds nominal_delay(int failed_attempts) const;

  // equal_jitter: uniform in [nominal/2, nominal] driven by `unit_random` in [0, 1), so the
  // delay is never below half the nominal one and never above max_delay. added_jitter: the
  // nominal delay of one more failure plus up to added_jitter, never above max_delay.
  std::chrono::milliseconds backoff(int failed_attempts, double unit_random) const;

  // True when a row that has now failed `attempts_made` times may not be tried again.
  bool attempts_exhausted(int attempts_made) const;
  // True when a row created `age` ago, retried after `delay`, would be past the retry window.
  bool past_window(std::chrono::duration<double> age, std::chrono::milliseconds delay) const;

 private:
  retry_config config_;
};

}  // namespace surge::proto
