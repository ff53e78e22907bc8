#pragma once
// Noticing rows that other connections queued, so a drain sends them at once instead of at the
// next idle poll: what one look reports (storage/drain_store.hpp, check_new_rows).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace surge::storage {

struct new_rows {
  bool changed = false;  // another connection committed since the last check
  // Subscribers with due rows added since the last check (sorted, unique).
  std::vector<std::int64_t> subscribers;
  bool all = false;  // more new rows than the look reads: any subscriber may have some
  bool any() const { return all || !subscribers.empty(); }
};

}  // namespace surge::storage
