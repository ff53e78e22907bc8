#pragma once
// What an attempt's end does in a shard, carried out on the shard's machines: its rows let go,
// the origin's latency measured, what the answer says of the subscriber (subscriber_response)
// acted on (a pause, a 410, narrower batches, an open circuit, a held URL), and the rows'
// outcomes handed to shard_rows. Rows never sent go back to the queue uncounted. The core then
// ends the attempt (its slots, its subscriber's pump) and claims again after a freed key.
// Sans-I/O: the core passes the time in.
#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine/net/http_result.hpp"
#include "engine/observe/log.hpp"
#include "engine/observe/metrics.hpp"
#include "engine/shard/attempts.hpp"
#include "engine/shard/demand_planner.hpp"
#include "engine/shard/shard_actions.hpp"
#include "engine/shard/shard_rows.hpp"
#include "engine/shard/slots.hpp"
#include "engine/shard/subscriber.hpp"
#include "engine/shard/wakes.hpp"
#include "proto/retry_policy.hpp"
#include "storage/outcomes.hpp"

namespace surge::engine {

struct settlement_config {
  proto::retry_policy retry{proto::retry_config{}};
  std::chrono::seconds retry_after_cap{std::chrono::hours(1)};
  // A pause at least this long gives the subscriber's ready rows back (rescheduled after it).
  std::chrono::milliseconds pause_release_threshold{std::chrono::seconds(5)};
  // How long a subscriber whose URL the target policy refuses waits before it is tried again.
  std::chrono::milliseconds refused_target_hold{std::chrono::seconds(60)};
  // How long a row whose connect found no file descriptor waits before it is claimed again.
  std::chrono::milliseconds out_of_descriptors_wait{std::chrono::seconds(1)};
  // At most one warning per this long says descriptors ran out.
  std::chrono::milliseconds out_of_descriptors_warning_interval{std::chrono::seconds(10)};
};

// The shard's machines a settlement acts on; the core owns them.
struct settlement_machines {
  shard_rows& rows;
  shard_slots& slots;
  demand_planner& demand;
  wake_schedule& wakes;
  drain_metrics& metrics;
  core_log& log;
};

class attempt_settlement {
 public:
  using steady = std::chrono::steady_clock;

  // `seed` drives the backoff's jitter.
  attempt_settlement(settlement_config config, settlement_machines machines, std::uint64_t seed);

  // The attempt's exchange is over (or never began: result.not_sent). True when it finished an
  // ordered row and freed its key: the key's next row is worth a claim at once.
  bool settle(attempt_state& attempt, const http_result& result, shard_time now);

 private:
  // The subscriber answered 410 Gone: inactive until an operator enables it again.
  void deactivate(subscriber_state& sub, steady::time_point now);
  // A batch of `refused_rows` was refused as too large: the subscriber's batches are at most
  // `fits` rows from now on.
  void narrow_batches(subscriber_state& sub, std::size_t refused_rows, int fits);
  void pause(subscriber_state& sub, steady::duration pause, steady::time_point now, double now_unix,
             const char* reason);
  // Every resolved address of the subscriber's URL was refused by the target policy.
  void hold_for_refused_target(subscriber_state& sub, const attempt_rows& rows,
                               const std::string& refused, steady::time_point now, double now_unix);
  // The attempt's connect found no file descriptor free.
  void retry_without_descriptors(attempt_state& attempt, const std::string& why,
                                 steady::time_point now, double now_unix);

  settlement_config config_;
  settlement_machines on_;
  drain_counters& counters_;
  std::mt19937_64 rng_;
  std::vector<storage::outcome> settled_;  // scratch, so that a steady stream allocates nothing
  std::optional<steady::time_point> last_descriptor_warning_;
};

}  // namespace surge::engine
