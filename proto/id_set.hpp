#pragma once
// Subscriber selections such as "1,4,10-20" (the --subscribers flag).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace surge::proto {

class id_set {
 public:
  // Everything.
  id_set() = default;

  // Parses "1,4,10-20" (spaces allowed around entries). Empty text, a non-number, a reversed or
  // negative range is an error: nullopt and `error` says which entry.
  static std::optional<id_set> parse(std::string_view text, std::string* error = nullptr);

  bool all() const { return all_; }
  bool contains(std::int64_t id) const;
  const std::vector<std::pair<std::int64_t, std::int64_t>>& ranges() const { return ranges_; }
  std::string to_string() const;

  friend bool operator==(const id_set&, const id_set&) = default;

 private:
  bool all_ = true;
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges_;  // inclusive, sorted, merged
};

}  // namespace surge::proto
