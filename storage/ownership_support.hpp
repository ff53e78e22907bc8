#pragma once
// Rules of ownership leases that the SQLite and PostgreSQL keepers share; private to storage/.
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_set>
#include <string_view>
#include <utility>

#include <sys/types.h>

#include "proto/id_set.hpp"
#include "proto/ownership.hpp"
#include "storage/ownership.hpp"

namespace surge::storage::detail {

// Heartbeats of drainers gone for this long are deleted; their ownerships are long free.
inline constexpr double dead_drainer_keep_seconds = 3600;
// A heartbeat further ahead than this, or not a number, was not written by a renewal (another
// program, a hand edit, a clock far off): it counts as expired, so it cannot hold subscribers
// for ever.
inline constexpr double max_heartbeat_seconds = 60;

// A renewal reads every subscriber and owner at least this often, whatever the fingerprint says
// (proto::heartbeat_is_enough).
inline constexpr double full_renewal_every_seconds = 30;

// A --subscribers selection as surge_drainer.subscribers stores it ("*" for all), and back.
std::string selection_text(const proto::id_set& allowed);
proto::id_set parse_selection(const std::string& text);

// A drainer on this host whose process no longer exists (killed, crashed): its heartbeat is
// ended at once instead of waited out.
bool gone_from_this_host(std::string_view self, std::string_view other);

// What a full renewal's plan changed for a drainer that owned `owned` before it; `owned`
// becomes what it owns now, and `last_full` what this renewal saw (proto::heartbeat_is_enough).
ownership_change apply_plan(const proto::ownership_plan& plan,
                            std::unordered_set<std::int64_t>& owned, proto::renewal_view view,
                            double now, std::optional<proto::full_renewal>& last_full);

}  // namespace surge::storage::detail
