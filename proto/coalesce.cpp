#include "proto/coalesce.hpp"

#include <algorithm>
#include <unordered_map>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include "proto/event_match.hpp"

namespace surge::proto {

std::string coalesce_pointer_problem(std::string_view pointer) {
  if (pointer.empty()) return "is empty (use --coalesce '' only to turn coalescing off)";
  if (pointer.front() != '/') return "must start with '/' (a JSON pointer such as /data/video_id)";
  for (std::size_t i = 0; i < pointer.size(); ++i) {
    if (pointer[i] != '~') continue;
    if (i + 1 >= pointer.size() || (pointer[i + 1] != '0' && pointer[i + 1] != '1')) {
      return "has '~' not followed by 0 or 1 (RFC 6901 escapes)";
    }
  }
  return {};
}

std::optional<std::string> coalesce_key(const coalesce_rule& rule, std::string_view event_type,
                                        std::string_view payload) {
  if (!event_matches(rule.event_types, event_type)) return std::nullopt;
  boost::system::error_code ec;
  const auto parsed = boost::json::parse(payload, ec);
  if (ec) return std::nullopt;
  const auto* found = parsed.find_pointer(rule.pointer, ec);
  if (ec || found == nullptr) return std::nullopt;
  std::string key(event_type);
  key += '\0';  // event types cannot hold NUL, so (type, value) pairs cannot collide
  key += boost::json::serialize(*found);
  return key;
}

std::vector<std::int64_t> plan_coalescing(std::span<const coalesce_candidate> candidates,
                                          double window_seconds) {
  std::vector<std::int64_t> replaced_by(candidates.size(), 0);
  std::unordered_map<std::string_view, std::vector<std::size_t>> by_key;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].key) by_key[*candidates[i].key].push_back(i);
  }
  for (auto& [key, members] : by_key) {
    // Newest first.
    std::sort(members.begin(), members.end(), [&](std::size_t a, std::size_t b) {
      const auto& x = candidates[a];
      const auto& y = candidates[b];
      return x.created_at != y.created_at ? x.created_at > y.created_at : x.id > y.id;
    });
    const coalesce_candidate* keeper = nullptr;
    for (const std::size_t index : members) {
      const auto& row = candidates[index];
      const double oldest = row.stands_since.value_or(row.created_at);
      if (keeper != nullptr && keeper->created_at - oldest <= window_seconds) {
        replaced_by[index] = keeper->id;
      } else {
        keeper = &row;
      }
    }
  }
  return replaced_by;
}

double stands_since_after_merge(const coalesce_candidate& keeper,
                                const coalesce_candidate& merged) {
  return std::min({keeper.stands_since.value_or(keeper.created_at), merged.created_at,
                   merged.stands_since.value_or(merged.created_at)});
}

}  // namespace surge::proto
