#pragma once
// The Prometheus text exposition (0.0.4) of a drain's metrics, as /metrics serves it: the
// counters and histograms, the shards' latest snapshots, the sampled queue and the partner view.
#include <cstddef>
#include <string>

#include "engine/observe/metrics.hpp"

namespace surge::engine {

// Per-subscriber series for the `top` busiest (or most queued, or unhappiest) only.
std::string metrics_text(const drain_metrics& metrics, std::size_t top);

}  // namespace surge::engine
