#pragma once
// Minimal leveled logging to stderr, safe from any thread. One line per call.
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

}  // namespace surge::engine
