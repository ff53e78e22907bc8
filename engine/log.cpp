#include "engine/log.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace surge::engine {

namespace {
std::atomic<log_level> threshold{log_level::info};
std::mutex output_mutex;

const char* name(log_level level) {
  switch (level) {
    case log_level::debug: return "debug";
    case log_level::info: return "info";
    case log_level::warn: return "warn";
    case log_level::error: return "error";
  }
  return "info";
}
}  // namespace

void set_log_level(log_level level) { threshold = level; }

void log(log_level level, std::string_view message) {
  if (level < threshold.load(std::memory_order_relaxed)) return;
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(
                          now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &utc);
  std::lock_guard lock(output_mutex);
  std::fprintf(stderr, "%s.%03dZ %-5s %.*s\n", stamp, static_cast<int>(millis), name(level),
               static_cast<int>(message.size()), message.data());
}

}  // namespace surge::engine
