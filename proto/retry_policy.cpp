#include "proto/retry_policy.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace surge::proto {

std::chrono::milliseconds retry_policy::nominal_delay(int failed_attempts) const {
  using rep = std::chrono::milliseconds::rep;
  const rep cap = std::max<rep>(config_.max_delay.count(), 0);
  const rep base = std::clamp<rep>(config_.base_delay.count(), 0, cap);
  const int doublings = std::max(failed_attempts, 1) - 1;
  // Doubling stops at the cap, so large attempt counts cannot overflow the shift.
  rep delay = base;
  for (int i = 0; i < doublings && delay > 0 && delay < cap; ++i) {
    delay = delay > cap / 2 ? cap : delay * 2;
  }
  return std::chrono::milliseconds(delay);
}

std::chrono::milliseconds retry_policy::backoff(int failed_attempts, double unit_random) const {
  // NaN fails both comparisons and ends up at the low end as well.
  const double u = unit_random > 0.0 ? std::min(unit_random, 1.0) : 0.0;
  if (config_.rule == backoff_rule::added_jitter) {
    // base × 2^n is the nominal delay one failure later (nominal_delay counts from 2^0).
    const auto doubled = nominal_delay(std::max(failed_attempts, 0) + 1).count();
    const auto jitter = std::llround(
        static_cast<double>(std::max<std::int64_t>(config_.added_jitter.count(), 0)) * u);
    const auto cap = std::max<std::chrono::milliseconds::rep>(config_.max_delay.count(), 0);
    return std::chrono::milliseconds(
        std::min<std::chrono::milliseconds::rep>(doubled + jitter, cap));
  }
  const auto nominal = nominal_delay(failed_attempts).count();
  // Rounding the half up keeps the result at or above the exact half of an odd nominal delay.
  const auto low = nominal - nominal / 2;
  const auto spread = static_cast<double>(nominal - low);
  const auto jitter = static_cast<std::chrono::milliseconds::rep>(std::llround(spread * u));
  return std::chrono::milliseconds(std::min(low + jitter, nominal));
}

bool retry_policy::attempts_exhausted(int attempts_made) const {
  return attempts_made >= config_.max_attempts;
}

bool retry_policy::past_window(std::chrono::duration<double> age,
                               std::chrono::milliseconds delay) const {
  const std::chrono::duration<double> retry_at = age + delay;
  return retry_at > config_.max_age;
}

}  // namespace surge::proto
