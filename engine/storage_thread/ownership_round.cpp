#include "engine/storage_thread/ownership_round.hpp"

namespace surge::engine {

std::vector<storage_do::tell_owner_change> ownership_round::renewed(
    const storage::ownership_change& change) {
  std::vector<storage_do::tell_owner_change> tell;
  if (!std::exchange(first_, false) && !change.taken.empty()) {
    tell.push_back(storage_do::tell_owner_change{change.taken, true});
  }
  auto disowned = change.released;
  disowned.insert(disowned.end(), change.lost.begin(), change.lost.end());
  if (!disowned.empty()) tell.push_back(storage_do::tell_owner_change{std::move(disowned), false});
  return tell;
}

}  // namespace surge::engine
