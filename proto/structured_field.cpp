#include "proto/structured_field.hpp"

namespace surge::proto::sf {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_lcalpha(char c) { return c >= 'a' && c <= 'z'; }
bool one_of(char c, std::string_view set) { return set.find(c) != std::string_view::npos; }

// RFC 9110 tchar; with ':' and '/' it makes up the rest of a Token.
bool is_tchar(char c) { return is_alpha(c) || is_digit(c) || one_of(c, "!#$%&'*+-.^_`|~"); }

std::string_view trim(std::string_view text) {
  constexpr std::string_view space = " \t";
  const std::size_t first = text.find_first_not_of(space);
  if (first == std::string_view::npos) {
    return {};
  }
  return text.substr(first, text.find_last_not_of(space) - first + 1);
}

// The parsing algorithms of RFC 9651 section 4.2, each consuming from the front of `rest` and
// returning false where the RFC says parsing fails.
class cursor {
 public:
  cursor(std::string_view& rest, std::span<const std::string_view> wanted)
      : rest_(rest), wanted_(wanted) {}

  // Section 4.2.1, one turn of its loop: a member, then the comma before the next one.
  bool member(list_member& out) {
    out = list_member{};
    if (rest_.starts_with('(')) {
      out.inner_list = true;
      if (!inner_list()) {
        return false;
      }
    } else if (!bare(out.item)) {
      return false;
    }
    if (!parameters(&out.parameters)) {
      return false;
    }
    skip_ows();
    if (rest_.empty()) {
      return true;
    }
    if (rest_.front() != ',') {
      return false;
    }
    rest_.remove_prefix(1);
    skip_ows();
    return !rest_.empty();  // a trailing comma fails the list
  }

 private:
  using parameter_values = std::array<std::optional<bare_item>, max_wanted_parameters>;

  void skip_sp() {
    while (rest_.starts_with(' ')) {
      rest_.remove_prefix(1);
    }
  }
  void skip_ows() {
    while (rest_.starts_with(' ') || rest_.starts_with('\t')) {
      rest_.remove_prefix(1);
    }
  }

  // Section 4.2.1.2. The items of an inner list are checked, not kept.
  bool inner_list() {
    rest_.remove_prefix(1);
    while (!rest_.empty()) {
      skip_sp();
      if (rest_.starts_with(')')) {
        rest_.remove_prefix(1);
        return true;
      }
      bare_item item;
      if (!bare(item) || !parameters(nullptr)) {
        return false;
      }
      if (!rest_.starts_with(' ') && !rest_.starts_with(')')) {
        return false;
      }
    }
    return false;
  }

  // Section 4.2.3.2; `out` null: check only.
  bool parameters(parameter_values* out) {
    while (rest_.starts_with(';')) {
      rest_.remove_prefix(1);
      skip_sp();
      std::string_view name;
      if (!key(name)) {
        return false;
      }
      bare_item value;
      value.kind = bare_kind::boolean;  // a key alone is the Boolean true
      value.integer = 1;
      if (rest_.starts_with('=')) {
        rest_.remove_prefix(1);
        if (!bare(value)) {
          return false;
        }
      }
      if (out == nullptr) {
        continue;
      }
      for (std::size_t i = 0; i < wanted_.size() && i < max_wanted_parameters; ++i) {
        if (wanted_[i] == name) {
          (*out)[i] = value;
        }
      }
    }
    return true;
  }

  // Section 4.2.3.3.
  bool key(std::string_view& out) {
    if (rest_.empty() || !(is_lcalpha(rest_.front()) || rest_.front() == '*')) {
      return false;
    }
    std::size_t n = 1;
    while (n < rest_.size() &&
           (is_lcalpha(rest_[n]) || is_digit(rest_[n]) || one_of(rest_[n], "_-.*"))) {
      ++n;
    }
    out = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return true;
  }

  // Section 4.2.3.1.
  bool bare(bare_item& out) {
    if (rest_.empty()) {
      return false;
    }
    const char c = rest_.front();
    if (c == '-' || is_digit(c)) {
      return number(out);
    }
    if (c == '"') {
      out.kind = bare_kind::string;
      return string(out.text);
    }
    if (c == '*' || is_alpha(c)) {
      out.kind = bare_kind::token;
      return token(out.text);
    }
    if (c == ':') {
      out.kind = bare_kind::byte_sequence;
      return byte_sequence();
    }
    if (c == '?') {
      out.kind = bare_kind::boolean;
      return boolean(out);
    }
    if (c == '@') {
      return date(out);
    }
    if (c == '%') {
      out.kind = bare_kind::display;
      return display_string();
    }
    return false;
  }

  // Section 4.2.4: an Integer has at most 15 digits, so no value overflows; a Decimal at most 12
  // before its point and 1 to 3 after. Leading zeros are allowed, a '+' is not.
  bool number(bare_item& out) {
    std::size_t n = 0;
    const bool negative = rest_.starts_with('-');
    if (negative) {
      ++n;
    }
    if (n == rest_.size() || !is_digit(rest_[n])) {
      return false;
    }
    std::int64_t value = 0;
    std::size_t digits = 0;
    std::size_t point = std::string_view::npos;
    for (; n < rest_.size(); ++n) {
      const char c = rest_[n];
      if (is_digit(c)) {
        if (point == std::string_view::npos) {
          value = value * 10 + (c - '0');
        }
        ++digits;
      } else if (c == '.' && point == std::string_view::npos) {
        if (digits > 12) {
          return false;
        }
        point = n;
      } else {
        break;
      }
      if (digits > 15) {
        return false;
      }
    }
    if (point == std::string_view::npos) {
      out.kind = bare_kind::integer;
      out.integer = negative ? -value : value;
    } else {
      const std::size_t fraction = n - point - 1;
      if (fraction == 0 || fraction > 3) {
        return false;
      }
      out.kind = bare_kind::decimal;
    }
    rest_.remove_prefix(n);
    return true;
  }

  // Section 4.2.5: printable ASCII; \" and \\ are the only escapes.
  bool string(std::string_view& out) {
    for (std::size_t n = 1; n < rest_.size(); ++n) {
      const auto c = static_cast<unsigned char>(rest_[n]);
      if (c == '\\') {
        ++n;
        if (n == rest_.size() || (rest_[n] != '"' && rest_[n] != '\\')) {
          return false;
        }
      } else if (c == '"') {
        out = rest_.substr(1, n - 1);
        rest_.remove_prefix(n + 1);
        return true;
      } else if (c < 0x20 || c >= 0x7f) {
        return false;
      }
    }
    return false;
  }

  // Section 4.2.6.
  bool token(std::string_view& out) {
    std::size_t n = 1;
    while (n < rest_.size() && (is_tchar(rest_[n]) || rest_[n] == ':' || rest_[n] == '/')) {
      ++n;
    }
    out = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return true;
  }

  // Section 4.2.7: base64 characters between colons. Whether they decode is not checked, as
  // nothing reads a Byte Sequence's bytes.
  bool byte_sequence() {
    for (std::size_t n = 1; n < rest_.size(); ++n) {
      const char c = rest_[n];
      if (c == ':') {
        rest_.remove_prefix(n + 1);
        return true;
      }
      if (!is_alpha(c) && !is_digit(c) && !one_of(c, "+/=")) {
        return false;
      }
    }
    return false;
  }

  // Section 4.2.8.
  bool boolean(bare_item& out) {
    if (rest_.size() < 2 || (rest_[1] != '0' && rest_[1] != '1')) {
      return false;
    }
    out.integer = rest_[1] - '0';
    rest_.remove_prefix(2);
    return true;
  }

  // Section 4.2.9: '@' and an Integer.
  bool date(bare_item& out) {
    rest_.remove_prefix(1);
    if (!number(out) || out.kind != bare_kind::integer) {
      return false;
    }
    out.kind = bare_kind::date;
    return true;
  }

  // Section 4.2.10: printable ASCII with lowercase %xx escapes whose bytes are UTF-8. The check
  // is structural (lead and continuation bytes); nothing reads the text.
  bool display_string() {
    if (rest_.size() < 2 || rest_[1] != '"') {
      return false;
    }
    int continuation = 0;  // UTF-8 continuation bytes still expected
    for (std::size_t n = 2; n < rest_.size(); ++n) {
      const auto c = static_cast<unsigned char>(rest_[n]);
      if (c < 0x20 || c >= 0x7f) {
        return false;
      }
      unsigned byte = c;
      if (c == '"') {
        if (continuation != 0) {
          return false;
        }
        rest_.remove_prefix(n + 1);
        return true;
      }
      if (c == '%') {
        byte = 0;
        for (int k = 0; k < 2; ++k) {
          ++n;
          const char h = n < rest_.size() ? rest_[n] : '\0';
          if (is_digit(h)) {
            byte = byte * 16 + static_cast<unsigned>(h - '0');
          } else if (h >= 'a' && h <= 'f') {
            byte = byte * 16 + static_cast<unsigned>(h - 'a' + 10);
          } else {
            return false;
          }
        }
      }
      if (continuation > 0) {
        if ((byte & 0xc0) != 0x80) {
          return false;
        }
        --continuation;
      } else if (byte >= 0xc2 && byte <= 0xdf) {
        continuation = 1;
      } else if (byte >= 0xe0 && byte <= 0xef) {
        continuation = 2;
      } else if (byte >= 0xf0 && byte <= 0xf4) {
        continuation = 3;
      } else if (byte >= 0x80) {
        return false;
      }
    }
    return false;
  }

  std::string_view& rest_;
  std::span<const std::string_view> wanted_;
};

// The characters of a String or Token once unescaped, one at a time.
class unescaped {
 public:
  unescaped(std::string_view text, bool quoted) : rest_(text), quoted_(quoted) {}

  bool next(char& out) {
    if (rest_.empty()) {
      return false;
    }
    if (quoted_ && rest_.front() == '\\' && rest_.size() > 1) {
      rest_.remove_prefix(1);
    }
    out = rest_.front();
    rest_.remove_prefix(1);
    return true;
  }

 private:
  std::string_view rest_;
  bool quoted_;
};

}  // namespace

list_reader::list_reader(std::string_view field_line, std::span<const std::string_view> wanted_keys)
    : rest_(trim(field_line)), wanted_(wanted_keys) {}

list_step list_reader::next(list_member& out) {
  if (failed_) {
    return list_step::invalid;
  }
  if (rest_.empty()) {
    return list_step::end;
  }
  if (!cursor(rest_, wanted_).member(out)) {
    failed_ = true;
    return list_step::invalid;
  }
  return list_step::member;
}

bool same_text(std::string_view a, bool quoted_a, std::string_view b, bool quoted_b) {
  unescaped x(a, quoted_a);
  unescaped y(b, quoted_b);
  char cx = 0;
  char cy = 0;
  while (true) {
    const bool more_x = x.next(cx);
    const bool more_y = y.next(cy);
    if (more_x != more_y) {
      return false;
    }
    if (!more_x) {
      return true;
    }
    if (cx != cy) {
      return false;
    }
  }
}

}  // namespace surge::proto::sf
