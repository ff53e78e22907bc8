#pragma once
// Minimal leveled logging to stderr, safe from any thread. One line per call.
#include <string_view>

namespace surge::engine {

enum class log_level { debug, info, warn, error };

void set_log_level(log_level level);
void log(log_level level, std::string_view message);

inline void log_info(std::string_view message) { log(log_level::info, message); }
inline void log_warn(std::string_view message) { log(log_level::warn, message); }
inline void log_error(std::string_view message) { log(log_level::error, message); }

}  // namespace surge::engine
