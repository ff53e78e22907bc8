#include "engine/observe/exposition.hpp"

#include <cstdio>

namespace surge::engine::exposition {

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void value_line(std::string& out, const std::string& name, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, " %.17g\n", value);
  out += name;
  out += buffer;
}

std::string label_value(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace surge::engine::exposition
