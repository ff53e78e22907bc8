#include "proto/id_set.hpp"

#include <algorithm>
#include <charconv>
#include <limits>

namespace surge::proto {
namespace {

using range = std::pair<std::int64_t, std::int64_t>;

std::string_view trim(std::string_view text) {
  constexpr std::string_view blanks = " \t";
  const std::size_t first = text.find_first_not_of(blanks);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(blanks) - first + 1);
}

bool fail(std::string* error, std::string message) {
  if (error) *error = std::move(message);
  return false;
}

std::string quote(std::string_view text) { return "'" + std::string(text) + "'"; }

// Digits only: from_chars alone would accept a leading '-', which is reported separately.
bool parse_id(std::string_view text, std::string_view entry, std::int64_t& out,
              std::string* error) {
  text = trim(text);
  if (text.starts_with('-')) return fail(error, "negative id in " + quote(entry));
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos) {
    return fail(error, quote(entry) + " is not an id or an id range");
  }
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec == std::errc::result_out_of_range) return fail(error, "id too large in " + quote(entry));
  return ec == std::errc{} && end == text.data() + text.size();
}

bool parse_entry(std::string_view entry, range& out, std::string* error) {
  if (entry.empty()) return fail(error, "empty entry");
  if (entry.starts_with('-')) return fail(error, "negative id in " + quote(entry));
  const std::size_t dash = entry.find('-');
  if (dash == std::string_view::npos) {
    if (!parse_id(entry, entry, out.first, error)) return false;
    out.second = out.first;
    return true;
  }
  if (!parse_id(entry.substr(0, dash), entry, out.first, error) ||
      !parse_id(entry.substr(dash + 1), entry, out.second, error)) {
    return false;
  }
  if (out.first > out.second) return fail(error, "reversed range " + quote(entry));
  return true;
}

std::vector<range> merged(std::vector<range> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<range> out;
  for (const range& r : ranges) {
    // Touching ranges merge too ("1-3,4" is "1-4"); the max check avoids overflowing + 1.
    if (!out.empty() && (out.back().second == std::numeric_limits<std::int64_t>::max() ||
                         r.first <= out.back().second + 1)) {
      out.back().second = std::max(out.back().second, r.second);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace

std::optional<id_set> id_set::parse(std::string_view text, std::string* error) {
  text = trim(text);
  if (text.empty()) {
    fail(error, "empty id list");
    return std::nullopt;
  }
  // What to_string() prints for "everything", so that it parses back.
  if (text == "*") return id_set{};
  std::vector<range> ranges;
  while (true) {
    const std::size_t comma = text.find(',');
    range r;
    if (!parse_entry(trim(text.substr(0, comma)), r, error)) return std::nullopt;
    ranges.push_back(r);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  id_set set;
  set.all_ = false;
  set.ranges_ = merged(std::move(ranges));
  return set;
}

bool id_set::contains(std::int64_t id) const {
  if (all_) return true;
  // The first range ending at or after id is the only one that can hold it.
  const auto it = std::lower_bound(ranges_.begin(), ranges_.end(), id,
                                   [](const range& r, std::int64_t v) { return r.second < v; });
  return it != ranges_.end() && it->first <= id;
}

std::string id_set::to_string() const {
  if (all_) return "*";
  std::string out;
  for (const auto& [first, last] : ranges_) {
    if (!out.empty()) out += ',';
    out += std::to_string(first);
    if (last != first) out += '-' + std::to_string(last);
  }
  return out;
}

}  // namespace surge::proto
