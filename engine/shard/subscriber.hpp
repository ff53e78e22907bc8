#pragma once
// A subscriber as its shard sees it: the parsed configuration and the live scheduling state.
#include <chrono>
#include <climits>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/limits/circuit_breaker.hpp"
#include "engine/observe/partner_view.hpp"
#include "engine/config.hpp"
#include "engine/limits/payload_memory.hpp"
#include "engine/observe/log.hpp"
#include "engine/shard/ready_rows.hpp"
#include "engine/shard/scheduling.hpp"
#include "engine/shard/subscriber_limits.hpp"
#include "engine/shard/wire_line.hpp"
#include "engine/subscriber_settings.hpp"
#include "proto/batch.hpp"
#include "proto/coalesce.hpp"
#include "proto/extra_headers.hpp"
#include "proto/signing.hpp"
#include "proto/target_policy.hpp"
#include "storage/claims.hpp"
#include "storage/subscribers.hpp"

namespace surge::engine {

struct origin_state;

// What a subscriber's client certificate files gave (client_identities::get, in the reactor,
// which reads them): its identity, or why it cannot be used.
struct identity_lookup {
  std::shared_ptr<const client_identity> identity;
  std::string problem;
};

// The settings a (re)loaded row gives the drain, with the identity its certificate files gave.
// The row's rate and burst become those the drain uses (a pause while they are unusable or the
// credentials are). What changed for the operator goes to `log`, once per subscriber and value:
// `before` is what the subscriber had, null when it is new.
subscriber_settings reloaded_settings(storage::subscriber_row& row, identity_lookup identity,
                                      const subscriber_settings* before,
                                      const scheduler_config& config, core_log& log);

struct subscriber_state {
  subscriber_state(const storage::subscriber_row& row, subscriber_settings settings,
                   std::chrono::steady_clock::time_point now, double now_unix,
                   const scheduler_config& config);

  subscriber_settings settings;
  // The request head every row shares (request_head), and the target it was built for: a reload
  // that swaps the target makes the next attempt build it again.
  std::string request_head;
  std::shared_ptr<const proto::target> request_head_target;
  std::shared_ptr<const std::vector<proto::header_field>> request_head_extra;
  // When its next request may go: admission, the wire gate, its share of the persisted bucket,
  // the adaptive pace, the partner's announced quota and a pause.
  subscriber_limits limits;
  wire_line line;  // attempts ready to write, waiting at the gate in order
  circuit_breaker breaker;
  ready_rows ready;  // claimed, waiting for a token or a slot
  int in_flight = 0;
  int pending_claim = 0;  // rows asked of the storage thread, not yet answered
  // Payload memory (scheduler.max_payload_memory): what its buffered and in-flight rows hold, what
  // its pending rows are expected to bring, and what its rows weigh (engine/limits/payload_memory).
  subscriber_payload payload;
  int rows_in_answer = 0;  // rows the storage thread's latest answer brought, while it is taken in
  // Polling backoff for a subscriber whose last claim came back short; when the next poll is
  // due is kept by the shard's demand_planner, where its scan reads it.
  std::chrono::milliseconds idle_poll{0};
  // An ordered row finished since the last claim answer: a short answer may predate its write,
  // so it starts no idle backoff.
  bool key_freed = false;
  std::size_t scan_index = 0;  // its place in the shard's demand scan
  // While held because its URL resolved only to refused addresses: what was refused (a
  // subscriber's state, not its rows' fate); empty otherwise.
  std::string refused_target;
  // Set while a partial batch waits for more rows (at most the subscriber's batch_linger).
  std::optional<std::chrono::steady_clock::time_point> batch_wait_since;
  // Set while the front row waits for a token, to account token wait time.
  std::optional<std::chrono::steady_clock::time_point> token_wait_since;
  std::int64_t delivered = 0;
  double delivery_latency_sum = 0;  // seconds from created_at to the 2xx, over `delivered`
  std::int64_t failed_attempts = 0;
  smoothed_rate achieved;  // rows delivered per second, sampled as the metrics are published
  std::string last_error;  // the last failed attempt's reason, for the operator
  double last_error_unix = 0;
  bool gone = false;  // deactivated by its partner's 410 in this drain
  int consecutive_failures = 0;
  int unpaid_rate_limits = 0;  // 429s without a usable Retry-After in a row (proto/outcome)
  // The largest batch the partner took after refusing a larger one with 413 (for the drain's
  // life): the configured batch size is capped at it.
  int batch_fits = INT_MAX;
  // Queued for a free shard-wide in-flight slot (in its origin's slot queue), and whether it was
  // handed one: it may then send before the subscribers still queued.
  bool waiting_for_slot = false;
  bool slot_turn = false;
  bool token_watched = false;  // on the shard's token watch (demand_planner::watch_tokens)
  // The origin whose concurrency limit it is queued behind, if any (entries left behind in
  // another origin's queue by a URL change are recognised by this and skipped).
  origin_state* waiting_on_origin = nullptr;
  // The origin state of settings.target, and the target it was looked up for
  // (shard_slots::origin_of): found by its key once per target, not by hashing the key several
  // times per request.
  origin_state* origin = nullptr;
  std::shared_ptr<const proto::target> origin_target;
  bool origin_turn = false;  // woken from the head of that queue: may send before those behind
  // Another drain owns it now (storage/ownership.hpp): nothing more goes on the wire from here.
  bool disowned = false;
  // When the pump looks again of its own accord (max: only when something changes), and
  // whether it, or the wire line, is queued to look again at the end of the core's event.
  std::chrono::steady_clock::time_point pump_at = std::chrono::steady_clock::time_point::max();
  std::chrono::steady_clock::time_point line_at = std::chrono::steady_clock::time_point::max();
  bool pump_queued = false;
  bool line_queued = false;

  // A reload's settings: new limits take effect without resetting tokens, a pace lowered by
  // pushback or by the partner's announced quota stays lowered within them, and a batch size a
  // 413 lowered stays lowered.
  void reconfigure(subscriber_settings next, std::chrono::steady_clock::time_point now);

  // What the pump decides on about the subscriber itself and its front row (the shard's slots
  // and its stop are the shard's to add).
  scheduling::pump_facts own_facts(const row_checks& checks, std::size_t max_payload_bytes,
                                   std::chrono::steady_clock::time_point now,
                                   double now_unix) const;
  batch_limits batching() const { return {settings.batch_rows, settings.batch_bytes}; }

  // An open circuit whose cool-down has passed: one row may go out as the probe.
  bool probe_due(std::chrono::steady_clock::time_point now) const {
    return breaker.current() == circuit_breaker::state::open && now >= breaker.next_probe_at();
  }
};

// A shard's subscribers by id.
using subscriber_map = std::unordered_map<std::int64_t, std::unique_ptr<subscriber_state>>;

}  // namespace surge::engine
