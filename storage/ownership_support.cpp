#include "storage/ownership_support.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>

#include <signal.h>

#include "proto/ownership.hpp"

namespace surge::storage::detail {

std::string selection_text(const proto::id_set& allowed) {
  return allowed.all() ? "*" : allowed.to_string();
}

proto::id_set parse_selection(const std::string& text) {
  if (text == "*") return {};
  auto parsed = proto::id_set::parse(text);
  // A selection this version cannot read is treated as "takes nothing", never as "takes all".
  return parsed ? *parsed : *proto::id_set::parse("0-0");
}

// "surge@host:pid" split at the last colon; pid 0 when the name has another shape.
std::pair<std::string_view, pid_t> host_and_pid(std::string_view name) {
  const auto colon = name.rfind(':');
  if (colon == std::string_view::npos) return {name, 0};
  pid_t pid = 0;
  const auto digits = name.substr(colon + 1);
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  if (error != std::errc() || end != digits.data() + digits.size() || pid <= 0) return {name, 0};
  return {name.substr(0, colon), pid};
}

// A drainer on this host whose process no longer exists (killed, crashed): its heartbeat is
// ended at once instead of waited out, so a drain restarted after a crash takes over without
// delay. Only ESRCH counts: a process of another user (EPERM) is alive.
bool gone_from_this_host(std::string_view self, std::string_view other) {
  const auto [my_host, my_pid] = host_and_pid(self);
  const auto [host, pid] = host_and_pid(other);
  if (my_pid == 0 || pid == 0 || pid == my_pid || host != my_host) return false;
  return ::kill(pid, 0) == -1 && errno == ESRCH;
}

ownership_change apply_plan(const proto::ownership_plan& plan,
                            std::unordered_set<std::int64_t>& owned, proto::renewal_view view,
                            double now, std::optional<proto::full_renewal>& last_full) {
  ownership_change change;
  std::unordered_set<std::int64_t> now_owned(plan.keep.begin(), plan.keep.end());
  now_owned.insert(plan.take.begin(), plan.take.end());
  for (const auto id : owned) {
    if (!now_owned.contains(id) &&
        std::find(plan.release.begin(), plan.release.end(), id) == plan.release.end()) {
      change.lost.push_back(id);
    }
  }
  std::sort(change.lost.begin(), change.lost.end());
  change.taken = plan.take;
  change.awaited = plan.awaited.size();
  change.released = plan.release;
  owned = std::move(now_owned);
  last_full = proto::full_renewal{.view = std::move(view),
                                  .at = now,
                                  .awaiting = !plan.awaited.empty(),
                                  .owned_after = static_cast<std::int64_t>(owned.size())};
  return change;
}

}  // namespace surge::storage::detail
