#pragma once
// What --until-drained waits for: the rows of subscribers that can send within its wait, and
// retries that fall due within it. Everything else (rows of paused subscribers, of held ones that
// stay held past the wait) could keep a drain running for hours with nothing it can send, so it
// is left in the queue. Pure rules: the storage thread reads the inputs (the loaded subscribers,
// the shards' held subscribers, the clock) and counts what these select; backlog_watch decides
// from the counts when the drain has ended.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>

#include "engine/observe/snapshots.hpp"
#include "proto/id_set.hpp"

namespace surge::engine {

struct until_drained_wait {
  std::chrono::milliseconds retry_wait{0};  // --until-drained-wait
  // A pause shorter than this keeps its rows in memory (engine/config.hpp), so it is waited out.
  std::chrono::milliseconds pause_release_threshold{0};

  std::chrono::milliseconds longest() const {
    return std::max(retry_wait, pause_release_threshold);
  }
};

// The subscribers of `chosen` whose rows --until-drained waits for at `now_unix`. `sendable`:
// subscriber id and whether its settings let it send now (inactive, rate 0 or unusable limits
// do not); `held`: the subscribers the shards hold back (a circuit that stays open, unusable
// credentials, a refused target, a pause), with when they may send again.
proto::id_set drainable_subscribers(const proto::id_set& chosen, const until_drained_wait& wait,
                                    double now_unix,
                                    std::span<const std::pair<std::int64_t, bool>> sendable,
                                    std::span<const held_subscriber> held);

// Whether retries falling due `earliest_in` seconds from now (nullopt: none scheduled) keep an
// otherwise empty drain waiting: only once the shards are empty and nothing is outstanding, and
// only within the retry wait.
bool retry_due_within_wait(bool shards_empty, std::int64_t outstanding,
                           std::optional<double> earliest_in, std::chrono::milliseconds retry_wait);

}  // namespace surge::engine
