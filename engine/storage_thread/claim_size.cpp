#include "engine/storage_thread/claim_size.hpp"

#include <algorithm>

namespace surge::engine {

namespace {
std::size_t rows_of(const storage::subscriber_demand& entry) {
  return static_cast<std::size_t>(std::max(entry.rows, 0));
}
}  // namespace

void claim_size::cap(std::span<storage::subscriber_demand> demand) const {
  if (!capped()) return;
  std::size_t left = cap_;
  for (auto& entry : demand) {
    entry.rows = static_cast<int>(std::min(rows_of(entry), left));
    left -= static_cast<std::size_t>(entry.rows);
  }
}

void claim_size::timed_out(std::span<const storage::subscriber_demand> demand) {
  std::size_t asked = 0;
  for (const auto& entry : demand) asked += rows_of(entry);
  cap_ = std::max<std::size_t>(1, std::min(cap_, asked) / 2);
}

void claim_size::fitted() {
  if (!capped()) return;
  cap_ = cap_ >= uncapped_from ? SIZE_MAX : cap_ * 2;
}

}  // namespace surge::engine
