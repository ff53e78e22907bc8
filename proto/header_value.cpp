#include "proto/header_value.hpp"

namespace surge::proto {

namespace {

// Printable ASCII and the space: what almost every value is. One pass with no early exit, so
// the compiler can check many bytes at a time; the byte-by-byte pass below only names a problem.
bool plain_printable(std::string_view text) {
  unsigned outside = 0;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    outside |= static_cast<unsigned>(byte < 0x20) | static_cast<unsigned>(byte >= 0x7f);
  }
  return outside == 0;
}

// The worst problem first: CR/LF is what injects, so it is named even when other bytes are
// also wrong.
std::string_view classify(std::string_view text, bool allow_blank) {
  if (allow_blank && plain_printable(text)) return {};
  bool nul = false;
  bool control = false;
  bool blank = false;
  bool non_ascii = false;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte == '\r' || byte == '\n') return "contains CR/LF";
    if (byte == 0) {
      nul = true;
    } else if (byte == ' ' || byte == '\t') {
      blank = true;
    } else if (byte < 0x20 || byte == 0x7f) {
      control = true;
    } else if (byte > 0x7f) {
      non_ascii = true;
    }
  }
  if (nul) return "contains NUL";
  if (control) return "contains a control character";
  if (blank && !allow_blank) return "contains a space or tab";
  if (non_ascii) return "contains a non-ASCII byte";
  return {};
}

}  // namespace

std::string_view header_value_problem(std::string_view value) { return classify(value, true); }

std::string_view request_target_problem(std::string_view target) {
  if (!target.starts_with('/')) return "does not start with '/'";
  return classify(target, false);
}

}  // namespace surge::proto
