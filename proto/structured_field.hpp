#pragma once
// Reading an RFC 9651 Structured Field List (Structured Field Values for HTTP), member by member,
// without allocating. Enough to tell a valid List from an invalid one, which decides whether a
// field is ignored as a whole (RFC 9651 section 4.2), and to read Integers, Strings and Tokens
// and the parameters a caller asks for. Inner lists, Decimals, Byte Sequences, Booleans, Dates
// and Display Strings are checked but not decoded.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace surge::proto::sf {

enum class bare_kind { integer, decimal, string, token, byte_sequence, boolean, date, display };

struct bare_item {
  bare_kind kind = bare_kind::integer;
  std::int64_t integer = 0;  // an Integer's value (and a Date's): 15 digits at most, signed
  // A String between its quotes with its escapes still in (\" and \\), or a Token.
  std::string_view text;
};

inline constexpr std::size_t max_wanted_parameters = 8;

struct list_member {
  bool inner_list = false;
  bare_item item;  // when not an inner list
  // parameters[i] is the value of the i-th wanted key when the member has it; a key given twice
  // counts with its last value, and a key without a value is the Boolean true (RFC 9651).
  std::array<std::optional<bare_item>, max_wanted_parameters> parameters{};
};

enum class list_step { member, end, invalid };

class list_reader {
 public:
  // `field_line` is one field line's value; spaces and tabs around it are ignored. Keys beyond
  // max_wanted_parameters are not looked for.
  list_reader(std::string_view field_line, std::span<const std::string_view> wanted_keys);

  // The next member, the end of the list, or `invalid` when the rest does not parse (and on
  // every call after that). An empty line is an empty list.
  list_step next(list_member& out);

 private:
  std::string_view rest_;
  std::span<const std::string_view> wanted_;
  bool failed_ = false;
};

// Whether two Strings or Tokens, as bare_item::text holds them, are the same text once unescaped
// (`quoted_a`: `a` is a String).
bool same_text(std::string_view a, bool quoted_a, std::string_view b, bool quoted_b);

}  // namespace surge::proto::sf
