#pragma once
// Subscriber event filters: '*', exact types, 'prefix.*', comma-separated with optional spaces.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace surge::proto {

bool event_matches(std::string_view patterns, std::string_view event_type);

// Empty when `patterns` is a valid filter, else a message naming the bad entry.
std::string validate_event_patterns(std::string_view patterns);

// The second published queue shape stores a subscriber's filter as a JSON array of the same
// patterns, one per element (["video.*","user.signup"]). nullopt unless `json` is an array of
// strings.
std::optional<std::vector<std::string>> parse_event_array(std::string_view json);
// Whether an element of the array matches, as event_matches does for one entry; false for text
// that is not such an array (a filter nobody can read queues nothing).
bool event_array_matches(std::string_view json, std::string_view event_type);
// The JSON array of a comma-separated filter's entries ("video.*, a" gives ["video.*","a"]).
std::string event_array_from_patterns(std::string_view patterns);

}  // namespace surge::proto
