#include "engine/storage_thread/refused_rows.hpp"

#include <algorithm>
#include <cstddef>

namespace surge::engine {

std::string refused_rows::reason(std::string_view refusal) {
  std::string reason = "the database refused this row's outcome: " + std::string(refusal);
  constexpr std::size_t reason_limit = 300;
  if (reason.size() > reason_limit) reason = reason.substr(0, reason_limit) + "...";
  return reason;
}

std::optional<storage::outcome> refused_rows::dead_letter(const storage::outcome& refused,
                                                          const std::string& reason) {
  if (refused.kind == storage::outcome_kind::dead ||
      refused.kind == storage::outcome_kind::release) {
    return std::nullopt;
  }
  auto dead = refused;
  dead.kind = storage::outcome_kind::dead;
  dead.last_error = reason;
  return dead;
}

void refused_rows::drop_from(std::vector<storage::claimed_row>& rows) const {
  if (quarantined_.empty()) return;
  std::erase_if(rows, [this](const auto& row) { return quarantined_.contains(row.id); });
}

std::int64_t refused_rows::finishable(std::int64_t outstanding) const {
  return std::max<std::int64_t>(0, outstanding - static_cast<std::int64_t>(quarantined_.size()));
}

}  // namespace surge::engine
