#include "proto/ordered_delivery.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

namespace surge::proto {

std::string order_pointer_problem(std::string_view pointer) {
  if (pointer.empty()) return {};
  if (pointer.front() != '/') return "must start with '/' (a JSON pointer such as /video_id)";
  for (std::size_t i = 0; i < pointer.size(); ++i) {
    if (pointer[i] != '~') continue;
    if (i + 1 >= pointer.size() || (pointer[i + 1] != '0' && pointer[i + 1] != '1')) {
      return "has '~' not followed by 0 or 1 (RFC 6901 escapes)";
    }
  }
  return {};
}

std::string order_key(std::string_view pointer, std::string_view payload) {
  if (pointer.empty()) return {};
  boost::system::error_code ec;
  // Deeper than Boost.JSON's default of 32 levels, so a deeply nested event is not taken for
  // one without the key; a payload is at most 1 MiB.
  boost::json::parse_options options;
  options.max_depth = 4096;
  const auto parsed = boost::json::parse(payload, ec, {}, options);
  if (ec) return {};
  const auto* found = parsed.find_pointer(pointer, ec);
  if (ec || found == nullptr) return {};
  return boost::json::serialize(*found);
}

bool key_heads::consider(const std::string& key, bool due, bool free) {
  const auto [seen, first] = seen_.try_emplace(key);
  if (!free) {
    seen->second.leased = true;
  } else if (!first && due && seen->second.leased) {
    held_behind_flight_ = true;
  }
  // Only the first row of a key can go; every later one waits for it, whatever its state.
  return first && due && free && !stopped_keys_.contains(key);
}

bool key_heads::may_go(const std::string& key) const {
  const auto seen = seen_.find(key);
  return seen != seen_.end() && !seen->second.leased;
}

std::string_view dead_key_name(dead_key rule) { return rule == dead_key::stops ? "stop" : "skip"; }

bool parse_dead_key(std::string_view text, dead_key& rule) {
  if (text == "skip") {
    rule = dead_key::moves_on;
  } else if (text == "stop") {
    rule = dead_key::stops;
  } else {
    return false;
  }
  return true;
}

}  // namespace surge::proto
