#include "engine/storage_thread/until_drained.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace surge::engine {

proto::id_set drainable_subscribers(const proto::id_set& chosen, const until_drained_wait& wait,
                                    double now_unix,
                                    std::span<const std::pair<std::int64_t, bool>> sendable,
                                    std::span<const held_subscriber> held) {
  const double horizon = now_unix + std::chrono::duration<double>(wait.longest()).count();
  std::vector<std::int64_t> blocked;
  for (const auto& one : held) {
    if (one.until_unix == 0 || one.until_unix > horizon) blocked.push_back(one.id);
  }
  std::sort(blocked.begin(), blocked.end());
  bool any_excluded = false;
  std::string list;
  for (const auto& [id, sends_now] : sendable) {
    if (!sends_now || std::binary_search(blocked.begin(), blocked.end(), id)) {
      any_excluded = true;
      continue;
    }
    if (!list.empty()) list += ',';
    list += std::to_string(id);
  }
  if (!any_excluded) return chosen;
  if (list.empty()) return proto::id_set::parse("0").value();  // no real subscriber has id 0
  return proto::id_set::parse(list).value();
}

bool retry_due_within_wait(bool shards_empty, std::int64_t outstanding,
                           std::optional<double> earliest_in,
                           std::chrono::milliseconds retry_wait) {
  if (!shards_empty || outstanding != 0 || retry_wait.count() <= 0 || !earliest_in) return false;
  return *earliest_in <= std::chrono::duration<double>(retry_wait).count();
}

}  // namespace surge::engine
