#pragma once
// Attempt results and times for judging attempts without sockets (delivery and batch tests).
#include <chrono>
#include <string>
#include <utility>

#include "engine/shard/delivery.hpp"

namespace surge::engine::testing {

inline attempt_times times_at(double started) {
  return {.started_unix = started,
          .finished_unix = started + 0.25,
          .now = std::chrono::system_clock::time_point{} + std::chrono::seconds(1'700'000'000)};
}

inline http_result answered(int status, std::string retry_after = {}) {
  http_result result;
  result.status = status;
  result.retry_after = std::move(retry_after);
  return result;
}

}  // namespace surge::engine::testing
