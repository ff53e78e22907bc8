#include "storage/database.hpp"

#include <sys/stat.h>

#include "storage/sql_support.hpp"

namespace surge::storage {

std::optional<file_identity> identify_file(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return std::nullopt;
  return file_identity{.device = info.st_dev, .inode = info.st_ino};
}

namespace detail {

std::string id_filter(const proto::id_set& which, std::string_view column) {
  if (which.all()) return "1 = 1";
  if (which.ranges().empty()) return "1 = 0";
  std::string out = "(";
  bool first = true;
  for (const auto& [low, high] : which.ranges()) {
    if (!first) out += " OR ";
    first = false;
    out.append(column);
    if (low == high) {
      out += " = " + std::to_string(low);
    } else {
      out += " BETWEEN " + std::to_string(low) + " AND " + std::to_string(high);
    }
  }
  out += ")";
  return out;
}

}  // namespace detail
}  // namespace surge::storage
