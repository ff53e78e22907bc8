#include "proto/announced_pace.hpp"

#include <algorithm>
#include <cmath>

namespace surge::proto {

announced_pace pace_for_quota(configured_limit configured,
                              const std::optional<announced_quota>& quota,
                              std::optional<std::chrono::seconds> retry_after,
                              std::chrono::system_clock::time_point now) {
  const double rate = configured.rate;
  const double burst = std::isnan(configured.burst) ? 1.0 : std::max(1.0, configured.burst);
  announced_pace pace{pace_kind::configured, rate, burst, now};
  // NaN fails this test too: a rate that is not a number is left for its owner to refuse.
  if (!quota || !(rate > 0)) {
    return pace;
  }
  // In double seconds: a Retry-After of seconds::max() must not overflow a time point.
  const double waited =
      retry_after ? std::max(0.0, static_cast<double>(retry_after->count())) : 0.0;
  const double window = std::chrono::duration<double>(quota->reset_at - now).count() - waited;
  if (!(window > 0)) {
    return pace;
  }
  const auto units = static_cast<double>(quota->remaining);
  if (burst + rate * window <= units) {
    return pace;
  }
  pace.until = quota->reset_at;
  if (units < 1) {
    pace.kind = pace_kind::paused;
    pace.rate = 0;
    return pace;
  }
  pace.kind = pace_kind::reduced;
  const double spare = units - rate * window;
  if (spare >= 1) {
    pace.burst = std::floor(spare);  // below `burst`, or the limit would have fit
    return pace;
  }
  pace.burst = 1;
  // Below the configured rate since spare < 1; min() only guards the last bit of rounding.
  pace.rate = std::min(rate, (units - 1) / window);
  if (!(pace.rate > 0)) {
    pace.kind = pace_kind::paused;
    pace.rate = 0;
    pace.burst = burst;
  }
  return pace;
}

}  // namespace surge::proto
