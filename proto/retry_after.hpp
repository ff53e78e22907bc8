#pragma once
// Retry-After (RFC 9110 section 10.2.3): delta-seconds or an HTTP-date.
#include <chrono>
#include <optional>
#include <string_view>

namespace surge::proto {

// Delay until the time the header names, clamped to [0, cap]. Accepts delta-seconds and the three
// HTTP-date forms (IMF-fixdate, RFC 850, asctime). A date in the past gives 0; garbage gives
// nullopt. Leading/trailing whitespace is ignored.
std::optional<std::chrono::seconds> parse_retry_after(std::string_view value,
                                                      std::chrono::system_clock::time_point now,
                                                      std::chrono::seconds cap);

}  // namespace surge::proto
