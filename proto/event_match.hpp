#pragma once
// Subscriber event filters: '*', exact types, 'prefix.*', comma-separated with optional spaces.
#include <string>
#include <string_view>

namespace surge::proto {

bool event_matches(std::string_view patterns, std::string_view event_type);

// Empty when `patterns` is a valid filter, else a message naming the bad entry.
std::string validate_event_patterns(std::string_view patterns);

}  // namespace surge::proto
