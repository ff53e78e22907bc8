#pragma once
// The per-origin series of /metrics: what each partner host is sent, what its adaptive limit
// lets it be sent, and the latencies that decide that (engine/limits/origin_limit), so that an
// operator can tell a host that is slow or queueing from one that is simply busy.
#include <cstddef>
#include <string>
#include <vector>

#include "engine/observe/snapshots.hpp"

namespace surge::engine {

// One snapshot per origin from the shards' snapshots of it: counts, limits and needs add up
// (a need is unknown when one shard's is), the best latency is the lowest a shard measured, the
// usual and acceptable latencies the highest, and an origin is judged by its usual latency
// when one shard judges it so.
std::vector<origin_snapshot> merge_origins(const std::vector<origin_snapshot>& per_shard);

// Appends the series of the `top` origins with the most requests in flight and subscribers
// waiting (then the highest configured rate), in the order of their names.
void render_origin_series(std::string& out, std::vector<origin_snapshot> origins, std::size_t top);

}  // namespace surge::engine
