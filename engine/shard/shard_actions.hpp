#pragma once
// What passes between a shard's core (engine/shard/core.hpp) and its reactor
// (engine/shard/shard.hpp): the time each event happens at, and the actions the core asks for.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/handoff.hpp"
#include "engine/net/client_identity.hpp"
#include "engine/shard/attempts.hpp"
#include "engine/shard/shard_rows.hpp"
#include "proto/target_policy.hpp"

namespace surge::engine {

// The clocks, read once per event by the reactor (engine/shard/shard.cpp): monotonic time for every
// wait and limit, wall-clock time for the queue's columns and HTTP dates.
struct shard_time {
  std::chrono::steady_clock::time_point steady;
  std::chrono::system_clock::time_point wall;

  double unix_seconds() const {
    return std::chrono::duration<double>(wall.time_since_epoch()).count();
  }
};

// A request to send: connect (or reuse a connection), ask the core at the wire gate, write,
// read the response, and hand the result back with on_response.
struct send_action {
  attempt_id attempt = 0;
  std::shared_ptr<const proto::target> target;
  std::shared_ptr<const client_identity> identity;
  std::shared_ptr<const proto::proxy_address> proxy;  // the subscriber's own; null: the drain's
  std::string request;  // the whole message's bytes; handed back with the result
};

// The answer to a write that waited at the wire gate (shard_core::on_write_ready).
struct write_verdict {
  attempt_id attempt = 0;
  bool go = false;  // false: give up, nothing written
};

// What the core asks its reactor to do, in the order of each list. The reactor takes them after
// every event (shard_core::actions) and clears them (clear_actions).
struct shard_actions {
  std::vector<storage::subscriber_demand> claim;  // empty: no claim; at most one outstanding
  std::vector<outcome_write> writes;
  std::vector<send_action> sends;
  std::vector<write_verdict> verdicts;
  std::vector<storage::partner_quota_row> quotas;  // announcements for `surge stats`
  // Close the keep-alive connections idle too long, before servers close them under us. Asked
  // on the flush tick (scheduler.outcome_flush_interval), so the shard needs no timer of its own
  // for it.
  bool evict_idle = false;
  // Set once, when the core finishes: the leased tokens it did not spend.
  std::optional<std::vector<storage::unspent_tokens>> unspent;
};

}  // namespace surge::engine
