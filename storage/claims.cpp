#include "storage/claims.hpp"

#include <cmath>
#include <cstdio>

#include <unistd.h>

#include "storage/lease_values.hpp"

namespace surge::storage {

std::string default_lease_owner() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') {
    std::snprintf(host, sizeof host, "%s", "unknown");
  }
  return "surge@" + std::string(host) + ":" + std::to_string(::getpid());
}

double lease_values::next(double now, double seconds) {
  // Whole milliseconds plus the nonce in the microsecond digits. The milliseconds are counted
  // as an integer: adding 0.001 to the last double would drift by up to
  // 0.12 us per addition at today's magnitudes, and a small nonce could drift to a whole
  // millisecond after a few dozen bumps.
  auto millis = static_cast<std::int64_t>(std::floor((now + seconds) * 1000.0));
  if (millis <= last_millis_) millis = last_millis_ + 1;
  last_millis_ = millis;
  return static_cast<double>(millis) / 1000.0 + nonce_;
}

}  // namespace surge::storage
