#include "engine/shard/scheduling.hpp"

#include <algorithm>
#include <climits>
#include <cmath>

namespace surge::engine::scheduling {

pump_decision next_pump_step(const pump_facts& facts, clock::time_point now) {
  pump_decision out;
  auto act = [&out](pump_action action) {
    out.action = action;
    return out;
  };
  if (!facts.has_rows) return out;
  // Deactivated or paused since these were claimed: back to the queue, rather than sit on
  // leases until it is active again.
  if (!facts.active || facts.rate_paused) return act(pump_action::release_buffered);
  if (facts.unusable) return act(pump_action::dead_letter_buffered);
  if (facts.front_too_large) return act(pump_action::dead_letter_front_too_large);
  if (facts.front_refused) return act(pump_action::dead_letter_front_refused);
  // Sending now could outlive the lease and race another drainer for the row.
  if (facts.front_lease_too_short) return act(pump_action::release_front);
  if (facts.paused_until > now) {
    out.wake_at = facts.paused_until;
    return out;
  }
  if (facts.circuit_blocking) {
    // Open: wait for the probe time. Probing: wait for the probe's answer.
    if (facts.next_probe_at) out.wake_at = *facts.next_probe_at;
    return out;
  }
  if (facts.in_flight >= facts.in_flight_cap) return out;  // one of its own must finish
  // One paced below one slot by its own rate may keep one request in flight whatever the
  // adaptive limits (the shard's and its origin's): holding it back cannot lighten the load,
  // only lose the tokens it earns meanwhile (burst 1 at 50/s, when a saturated CPU raises every
  // latency and the limits shrink). The shard's fixed cap holds for it too.
  const bool floor = facts.origin_floor && facts.in_flight == 0;
  if (facts.shard_full || (!facts.shard_admits && !floor)) {
    if (!facts.shard_full) out.wake_at = facts.shard_recount_at;
    return act(pump_action::queue_for_shard_slot);
  }
  // Likewise for the shard's slots: a slot freed while others wait is handed out by origin, and
  // one that already has requests out does not take it back ahead of them.
  if (!facts.slot_turn && facts.in_flight > 0 && facts.shard_has_waiters) {
    return act(pump_action::queue_for_shard_slot);
  }
  // One that already has requests out queues behind those waiting for its origin, unless it is
  // its turn: otherwise the subscriber whose attempt just finished takes each freed slot back,
  // and a big backlog keeps the origin's other subscribers waiting until it is gone.
  if ((!facts.origin_admits && !floor) ||
      (!facts.origin_turn && facts.in_flight > 0 && facts.origin_has_waiters)) {
    out.wake_at = facts.origin_recount_at;
    return act(pump_action::queue_for_origin);
  }
  const bool token_now = facts.token_wait == clock::duration::zero();
  // A partial batch waits for more rows, at most its linger, while a token is there (while it
  // waits for a token, rows gather anyway).
  if (facts.batching && !facts.batch_full && token_now && !facts.stopping) {
    if (!facts.batch_wait_since) {
      out.wake_at = now + facts.batch_linger;
      return act(pump_action::start_linger);
    }
    if (now < *facts.batch_wait_since + facts.batch_linger) {
      out.wake_at = *facts.batch_wait_since + facts.batch_linger;
      return out;
    }
  }
  if (token_now) return act(pump_action::send);
  out.waits_for_token = true;
  if (facts.token_wait != clock::duration::max()) out.wake_at = now + facts.token_wait;
  return out;
}

int rows_to_claim(const demand_facts& facts, const demand_limits& limits, int budget,
                  claim_round round) {
  if (facts.poll_later || !facts.active) return 0;  // inactive: its rows stay queued, unleased
  int limit = 0;
  if (facts.unusable) {
    limit = limits.unusable_batch;
  } else if (facts.paused) {
    return 0;
  } else if (facts.circuit_blocking) {
    // An open circuit claims nothing but the one row its probe needs.
    if (!facts.probe_due) return 0;
    limit = 1;
  } else {
    // Rows it can send within the horizon: tokens now plus refill, bounded by a buffer of a
    // few in-flight slots so a fast subscriber stays fed between claim rounds. A batch
    // subscriber's request carries up to batch_rows rows.
    const double sendable = std::floor(facts.tokens_now + facts.rate * limits.horizon_seconds);
    const double buffer_cap = static_cast<double>(facts.in_flight_cap) * limits.buffer_per_slot;
    limit = static_cast<int>(std::min(sendable, buffer_cap)) * facts.batch_rows;
    if (facts.coalescing) {
      // Repeats of a key merge only while they wait together: claim further ahead, but no
      // more than it can send well within a lease.
      const double ahead =
          std::floor(facts.rate * facts.batch_rows * limits.coalesce_lookahead_seconds);
      limit = std::max(limit,
                       static_cast<int>(std::min<double>(limits.coalesce_lookahead_rows, ahead)));
    }
  }
  // Topped up only once at most half of it is held: a claim has a fixed cost (its statement,
  // its lease record), and a subscriber sending a row or two per demand round would otherwise
  // be claimed for a row or two each time. Once another subscriber starts a round, one holding
  // up to three quarters joins it: subscribers topped up together are claimed in one
  // transaction, and in a table a fan-out producer filled (one row per subscriber per event)
  // their next rows share pages, which are then leased, and later finished, once rather than
  // once per subscriber.
  if (round == claim_round::start ? facts.held * 2 > limit : facts.held * 4 > limit * 3) {
    return 0;
  }
  return std::max(0, std::min(limit - facts.held, budget));
}

bool wants_tokens(const token_facts& facts) {
  const bool about_to_send = facts.has_rows || (facts.claim_pending && !facts.idle_poll);
  if (!about_to_send || !facts.active || facts.unusable || facts.paused) return false;
  return !facts.circuit_blocking || facts.probe_due;
}

bool paced_below_one_slot(double rate, clock::duration origin_best_latency) {
  if (origin_best_latency == clock::duration::max()) return false;
  return rate * std::chrono::duration<double>(origin_best_latency).count() < 1.0;
}

int limit_wakeups(bool limit_enabled, int limit, int in_flight) {
  return limit_enabled ? std::max(0, limit - in_flight) : 1;
}

int origin_need_ceiling(double rate_sum, clock::duration acceptable_latency) {
  if (acceptable_latency == clock::duration::max()) return INT_MAX;
  const double ceiling =
      std::ceil(rate_sum * std::chrono::duration<double>(acceptable_latency).count()) + 4;
  // Not below INT_MAX: too large to count, or not a number (the rates are checked, but a NaN
  // cast to int would be undefined).
  return ceiling < static_cast<double>(INT_MAX) ? static_cast<int>(ceiling) : INT_MAX;
}

}  // namespace surge::engine::scheduling
