#pragma once
// The pace a subscriber is sent at while its partner's announced quota lasts (DESIGN section 3):
// never faster than its configured rate and burst, and slow enough that the partner does not run
// out of units before its window resets. Pure arithmetic: `now` is passed in.
//
// The rule. A bucket of capacity `burst` refilled at `rate` lets out at most burst + rate x T
// requests in the T seconds until the reset, whatever it holds now. With R units left:
// - burst + rate x T <= R: the configured limit fits, nothing changes;
// - R = 0: paused until the reset;
// - R - rate x T >= 1: the configured rate stays, the burst drops to floor(R - rate x T);
// - otherwise: a burst of 1 and (R - 1) / T per second, which spends the units evenly, the first
//   at once. With R = 1 that is a rate of 0: paused, the one unit being the margin for the one
//   request a bucket may hold.
// At the reset the configured limit applies again (`until`). A reset not in the future, a paused
// or invalid configured rate, or no quota at all changes nothing.
//
// Retry-After takes precedence (as the draft requires): it alone says when sending may resume,
// and the caller applies it as before. This only decides the pace after it: the units left are
// spread over what is left of the window once Retry-After has passed, and a window that ends
// before Retry-After does changes nothing. It never shortens a Retry-After; R = 0 with a window
// that outlasts Retry-After pauses until the reset, which is later.
#include <chrono>
#include <optional>

#include "proto/rate_limit_headers.hpp"

namespace surge::proto {

struct configured_limit {
  double rate = 0;   // per second; <= 0 means paused
  double burst = 1;  // bucket capacity; below 1 counts as 1
};

enum class pace_kind {
  configured,  // the configured limit, unchanged
  reduced,     // a lower rate or a smaller burst until `until`
  paused,      // nothing until `until`
};

struct announced_pace {
  pace_kind kind = pace_kind::configured;
  double rate = 0;   // never above the configured rate, never negative; 0 when paused
  double burst = 1;  // never above the configured burst, at least 1
  // When the configured limit applies again: the reset. `now` when kind is configured.
  std::chrono::system_clock::time_point until{};
};

// `retry_after`: the Retry-After delay the caller honours for this response, nullopt when none.
announced_pace pace_for_quota(configured_limit configured,
                              const std::optional<announced_quota>& quota,
                              std::optional<std::chrono::seconds> retry_after,
                              std::chrono::system_clock::time_point now);

}  // namespace surge::proto
