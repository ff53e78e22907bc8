// libFuzzer: event filters never crash, '*' matches everything, and a type always matches
// itself when it is a valid filter.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "proto/event_match.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto split = text.find('\n');
  const auto patterns = text.substr(0, split);
  const auto type = split == std::string_view::npos ? std::string_view{} : text.substr(split + 1);
  (void)surge::proto::event_matches(patterns, type);
  (void)surge::proto::validate_event_patterns(patterns);
  if (!surge::proto::event_matches("*", type)) std::abort();
  if (!type.empty() && type.find_first_of(", \t*") == std::string_view::npos &&
      surge::proto::validate_event_patterns(type).empty() &&
      !surge::proto::event_matches(type, type)) {
    std::abort();
  }
  return 0;
}
