#pragma once
// The queue's clock: wall-clock time as Unix seconds with a fraction, the unit of every time
// column (next attempt, lease, bucket update, finish). Engine code that only needs the time
// includes this rather than a storage header.
#include <chrono>

namespace surge::proto {

// Current wall-clock time as Unix seconds with a fraction, the queue's time unit.
inline double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace surge::proto
