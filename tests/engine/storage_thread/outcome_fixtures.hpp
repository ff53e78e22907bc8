#pragma once
// Outcomes numbered by delivery id, and the ids of a batch, for the tests of the outcomes the
// storage thread holds (outcome_batches, pending_outcomes).
#include <cstdint>
#include <span>
#include <vector>

#include "storage/outcomes.hpp"

namespace surge::engine::testing {

// `count` done outcomes with delivery ids first, first + 1, ..., each leased until 100 + its id.
inline std::vector<storage::outcome> numbered_outcomes(int count, int first = 1) {
  std::vector<storage::outcome> out;
  for (int i = first; i < first + count; ++i) {
    out.push_back({.delivery_id = i, .lease = 100.0 + i, .kind = storage::outcome_kind::done});
  }
  return out;
}

inline std::vector<std::int64_t> ids(std::span<const storage::outcome> batch) {
  std::vector<std::int64_t> out;
  for (const auto& outcome : batch) out.push_back(outcome.delivery_id);
  return out;
}

}  // namespace surge::engine::testing
