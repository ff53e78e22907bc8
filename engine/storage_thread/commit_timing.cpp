#include "engine/storage_thread/commit_timing.hpp"

namespace surge::engine {

bool outcomes_due(const commit_timing& timing, std::size_t waiting, bool deactivations_waiting,
                  std::chrono::steady_clock::duration since_last_commit, bool force,
                  bool frees_key) {
  if (waiting == 0 && !deactivations_waiting) return false;
  return force || (frees_key && waiting > 0) || waiting >= timing.rows ||
         since_last_commit >= timing.interval;
}

}  // namespace surge::engine
