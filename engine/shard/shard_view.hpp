#pragma once
// What a shard publishes of its subscribers for /metrics, the live page, --until-drained and the
// exit summary: each one's snapshot, the counts of those paused, failing or paced, and why a
// subscriber cannot send now. Pure functions of the subscribers' state and the time.
#include <chrono>
#include <optional>
#include <span>

#include "engine/observe/metrics.hpp"
#include "engine/shard/subscriber.hpp"

namespace surge::engine {

// Why `sub` cannot send now, if it cannot.
std::optional<held_subscriber> hold_of(const subscriber_state& sub,
                                       std::chrono::steady_clock::time_point now, double now_unix);

// Fills `view`'s subscriber counts, held subscribers and snapshots; samples each one's achieved
// rate as it goes.
void describe_subscribers(std::span<subscriber_state* const> subscribers,
                          std::chrono::steady_clock::time_point now,
                          std::chrono::system_clock::time_point wall,
                          drain_metrics::shard_view& view);

}  // namespace surge::engine
