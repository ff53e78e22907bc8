#pragma once
// Minimal leveled logging to stderr, safe from any thread. One line per call.
#include <string>
#include <string_view>

namespace surge::engine {

enum class log_level { debug, info, warn, error };

enum class log_format { text, json };

void set_log_level(log_level level);
void set_log_format(log_format format);

// While a terminal status line is shown, log lines first clear it; it is redrawn on its tick.
void set_status_line_active(bool active);
void write_status_line(std::string_view text);
void end_status_line();
void log(log_level level, std::string_view message);

inline void log_info(std::string_view message) { log(log_level::info, message); }
inline void log_warn(std::string_view message) { log(log_level::warn, message); }
inline void log_error(std::string_view message) { log(log_level::error, message); }

// Where a sans-I/O core's log lines go (the storage thread's and the shards'): log() in the drain,
// a list in the tests. The core then neither reads the clock a line is stamped with nor writes to
// stderr itself, and a test can read what it said.
class core_log {
 public:
  virtual ~core_log() = default;
  virtual void write(log_level level, std::string message) = 0;
};

// The drain's core_log: every line goes to log().
class stderr_log final : public core_log {
 public:
  void write(log_level level, std::string message) override { log(level, message); }
};

}  // namespace surge::engine
