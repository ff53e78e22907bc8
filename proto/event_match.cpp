#include "proto/event_match.hpp"

#include <algorithm>

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace surge::proto {
namespace {

constexpr std::string_view blanks = " \t";
constexpr std::string_view whitespace = " \t\r\n\v\f";

std::string_view trim(std::string_view text) {
  const std::size_t first = text.find_first_not_of(blanks);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(blanks) - first + 1);
}

// Calls f(entry) for every non-empty, trimmed entry; stops early when f returns true.
template <typename F>
bool any_entry(std::string_view patterns, F&& f) {
  while (true) {
    const std::size_t comma = patterns.find(',');
    const std::string_view entry = trim(patterns.substr(0, comma));
    if (!entry.empty() && f(entry)) return true;
    if (comma == std::string_view::npos) return false;
    patterns.remove_prefix(comma + 1);
  }
}

bool entry_matches(std::string_view entry, std::string_view event_type) {
  if (entry == "*") return true;
  if (entry.ends_with(".*")) {
    // Keep the dot in the prefix: "video.*" must not match "videos.x" nor "video" itself.
    const std::string_view prefix = entry.substr(0, entry.size() - 1);
    return event_type.size() > prefix.size() && event_type.starts_with(prefix);
  }
  return entry == event_type;
}

std::string entry_problem(std::string_view entry) {
  const std::string quoted = "'" + std::string(entry) + "'";
  if (entry.find_first_of(whitespace) != std::string_view::npos) {
    return "whitespace inside event pattern " + quoted;
  }
  if (entry == "*") return {};
  const std::size_t star = entry.find('*');
  if (star == std::string_view::npos) return {};
  if (star != entry.size() - 1 || !entry.ends_with(".*")) {
    return "'*' must be a whole pattern or follow a final '.' in " + quoted;
  }
  if (entry.size() == 2) return "nothing before '.*' in " + quoted;
  return {};
}

}  // namespace

bool event_matches(std::string_view patterns, std::string_view event_type) {
  return any_entry(patterns,
                   [&](std::string_view entry) { return entry_matches(entry, event_type); });
}

std::string validate_event_patterns(std::string_view patterns) {
  std::string problem;
  bool any = false;
  any_entry(patterns, [&](std::string_view entry) {
    any = true;
    problem = entry_problem(entry);
    return !problem.empty();
  });
  if (!any) return "event filter has no patterns";
  return problem;
}

std::optional<std::vector<std::string>> parse_event_array(std::string_view json) {
  boost::system::error_code ec;
  const auto value = boost::json::parse(json, ec);
  if (ec || !value.is_array()) return std::nullopt;
  std::vector<std::string> patterns;
  for (const auto& element : value.get_array()) {
    if (!element.is_string()) return std::nullopt;
    patterns.emplace_back(element.get_string());
  }
  return patterns;
}

bool event_array_matches(std::string_view json, std::string_view event_type) {
  const auto patterns = parse_event_array(json);
  if (!patterns) return false;
  return std::any_of(patterns->begin(), patterns->end(), [&](const std::string& entry) {
    return entry_matches(trim(entry), event_type);
  });
}

std::string event_array_from_patterns(std::string_view patterns) {
  boost::json::array out;
  any_entry(patterns, [&](std::string_view entry) {
    out.emplace_back(entry);
    return false;
  });
  return boost::json::serialize(out);
}

}  // namespace surge::proto
