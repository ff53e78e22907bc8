#include "engine/observe/log.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>

namespace surge::engine {

namespace {
std::atomic<log_level> threshold{log_level::info};
std::atomic<log_format> format{log_format::text};
std::atomic<bool> status_active{false};
std::mutex output_mutex;

void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

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
void set_log_format(log_format value) { format = value; }
void set_status_line_active(bool active) { status_active = active; }

void write_status_line(std::string_view text) {
  std::lock_guard lock(output_mutex);
  std::fprintf(stderr, "\r\033[K%.*s", static_cast<int>(text.size()), text.data());
  std::fflush(stderr);
}

void end_status_line() {
  std::lock_guard lock(output_mutex);
  if (status_active.exchange(false)) std::fputs("\n", stderr);
}

void log(log_level level, std::string_view message) {
  if (level < threshold.load(std::memory_order_relaxed)) return;
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &utc);
  char when[48];
  std::snprintf(when, sizeof when, "%s.%03dZ", stamp, static_cast<int>(millis));
  std::string line;
  if (format.load(std::memory_order_relaxed) == log_format::json) {
    line = std::string("{\"time\":\"") + when + "\",\"level\":\"" + name(level) + "\",\"message\":";
    append_json_string(line, message);
    line += "}\n";
  } else {
    char head[80];
    std::snprintf(head, sizeof head, "%s %-5s ", when, name(level));
    line = std::string(head).append(message).append("\n");
  }
  std::lock_guard lock(output_mutex);
  if (status_active.load(std::memory_order_relaxed)) std::fputs("\r\033[K", stderr);
  std::fputs(line.c_str(), stderr);
}

}  // namespace surge::engine
