#pragma once
// A core_log that keeps every line, for the core tests (storage and shard) to read what a core
// said.
#include <string>
#include <vector>

#include "engine/observe/log.hpp"

namespace surge::engine::testing {

struct log_line {
  log_level level;
  std::string text;
};

class recorded_log final : public core_log {
 public:
  void write(log_level level, std::string message) override {
    lines.push_back({level, std::move(message)});
  }
  bool says(const std::string& part) const {
    for (const auto& line : lines) {
      if (line.text.find(part) != std::string::npos) return true;
    }
    return false;
  }
  std::vector<log_line> lines;
};

}  // namespace surge::engine::testing
