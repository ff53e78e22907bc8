#pragma once
// A subscriber as its shard sees it: the parsed configuration and the live scheduling state.
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/steady_timer.hpp>

#include "engine/adaptive_rate.hpp"
#include "engine/circuit_breaker.hpp"
#include "engine/config.hpp"
#include "engine/token_bucket.hpp"
#include "proto/signing.hpp"
#include "proto/target_policy.hpp"
#include "storage/claims.hpp"
#include "storage/subscribers.hpp"

namespace surge::engine {

struct origin_state;

struct subscriber_settings {
  std::int64_t id = 0;
  std::string url;
  // Shared so that an attempt in flight keeps the target it started with when a reload swaps
  // the settings underneath it.
  std::shared_ptr<const proto::target> target;
  std::shared_ptr<const proto::signer> signer;
  double rate = 0;
  double burst = 1;
  bool active = true;
  int in_flight_cap = 1;
  // Why rows of this subscriber cannot be sent (inactive, bad URL, bad secret); empty if fine.
  std::string unusable_reason;
};

subscriber_settings derive_settings(const storage::subscriber_row& row,
                                    const scheduler_config& config);

struct subscriber_state {
  subscriber_state(const storage::subscriber_row& row, subscriber_settings settings,
                   boost::asio::any_io_executor executor, double now_unix,
                   const scheduler_config& config);

  subscriber_settings settings;
  token_bucket bucket;      // refills at pace.effective(), not always the configured rate
  adaptive_rate pace;
  circuit_breaker breaker;
  std::deque<storage::claimed_row> ready;  // claimed, waiting for a token or a slot
  int in_flight = 0;
  int pending_claim = 0;  // rows asked of the storage thread, not yet answered
  // Polling backoff for a subscriber whose last claim came back short.
  std::chrono::steady_clock::time_point poll_after{};
  std::chrono::milliseconds idle_poll{0};
  std::chrono::steady_clock::time_point paused_until{};
  // Set while the front row waits for a token, to account token wait time.
  std::optional<std::chrono::steady_clock::time_point> token_wait_since;
  std::int64_t delivered = 0;
  double delivery_latency_sum = 0;  // seconds from created_at to the 2xx, over `delivered`
  std::int64_t failed_attempts = 0;
  int consecutive_failures = 0;
  bool waiting_for_slot = false;  // queued for a free shard-wide in-flight slot
  // The origin whose concurrency limit it is queued behind, if any (entries left behind in
  // another origin's queue by a URL change are recognised by this and skipped).
  origin_state* waiting_on_origin = nullptr;
  bool origin_turn = false;  // woken from the head of that queue: may send before those behind
  // The pump sleeps on this timer; anything that changes what the pump can do cancels it.
  boost::asio::steady_timer wake;

  void notify() { wake.cancel(); }
  // An open circuit whose cool-down has passed: one row may go out as the probe.
  bool probe_due(std::chrono::steady_clock::time_point now) const {
    return breaker.current() == circuit_breaker::state::open && now >= breaker.next_probe_at();
  }
};

}  // namespace surge::engine
