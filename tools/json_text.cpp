#include "tools/json_text.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>

#include <boost/json/serialize.hpp>

namespace surge::tools {
namespace {

void write_number(double value, std::string& out) {
  // JSON has no NaN or infinity; Boost.JSON writes null for them, and so does this.
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  // Whole numbers up to 2^53 are exact as integers.
  constexpr double exact = 9007199254740992.0;
  if (value == std::trunc(value) && std::fabs(value) <= exact) {
    out += std::to_string(static_cast<std::int64_t>(value));
    return;
  }
  char text[400];  // the longest fixed form of a double (about 330 characters) fits
  const auto written = std::to_chars(text, text + sizeof text, value, std::chars_format::fixed);
  out.append(text, written.ptr);
}

void write(const boost::json::value& value, std::string& out) {
  switch (value.kind()) {
    case boost::json::kind::double_: write_number(value.get_double(), out); return;
    case boost::json::kind::array: {
      out += '[';
      bool first = true;
      for (const auto& item : value.get_array()) {
        if (!first) out += ',';
        first = false;
        write(item, out);
      }
      out += ']';
      return;
    }
    case boost::json::kind::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, item] : value.get_object()) {
        if (!first) out += ',';
        first = false;
        out += boost::json::serialize(boost::json::string_view(key));
        out += ':';
        write(item, out);
      }
      out += '}';
      return;
    }
    default: out += boost::json::serialize(value); return;
  }
}

}  // namespace

std::string json_text(const boost::json::value& value) {
  std::string out;
  write(value, out);
  return out;
}

}  // namespace surge::tools
