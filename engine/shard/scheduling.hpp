#pragma once
// The scheduler's decisions, kept pure in the shape of Boost.MySQL's pool:
// what a subscriber's pump does next, how many rows a subscriber is asked for, and how many
// waiters a freed origin slot wakes and which. The shard gathers the facts, passes the clock in
// and carries the decision out; the tests feed facts, no sockets.
#include <chrono>
#include <cstddef>
#include <deque>
#include <optional>

#include "engine/memory/node_cache.hpp"

namespace surge::engine::scheduling {

using clock = std::chrono::steady_clock;

// What the pump knows about one subscriber when it looks again.
struct pump_facts {
  bool has_rows = false;
  bool active = true;
  bool rate_paused = false;  // a rate of 0 (set, or because its limits are unusable)
  bool unusable = false;     // bad URL or secret: its rows are dead-lettered
  // About the row at the front of its ready queue:
  bool front_too_large = false;                    // payload over the cap, left in the database
  bool front_refused = false;                      // a value that may not reach a header
  bool front_lease_too_short = false;              // could not finish within its lease
  clock::time_point paused_until{};                // Retry-After
  bool circuit_blocking = false;                   // open with no probe due yet, or probing
  std::optional<clock::time_point> next_probe_at;  // when the open circuit's probe is due
  int in_flight = 0;
  int in_flight_cap = 1;
  bool shard_full = false;   // the shard's fixed in-flight cap is reached
  bool shard_admits = true;  // the shard's adaptive limit admits one more (shard_limit)
  // Others wait for a slot of the shard, and whether this subscriber waits too or was handed one
  // (its turn).
  bool shard_has_waiters = false;
  bool slot_turn = false;
  // When an attempt in flight from the shard becomes overdue and stops counting against its
  // adaptive limit.
  clock::time_point shard_recount_at = clock::time_point::max();
  // Its origin: whether the adaptive limit admits one more, whether others wait for it, and
  // whether this subscriber was woken from the head of that queue (its turn).
  bool origin_admits = true;
  bool origin_has_waiters = false;
  bool origin_turn = false;
  // It may keep one request in flight whatever the origin's limit (paced_below_one_slot).
  bool origin_floor = false;
  // When an attempt in flight to the origin becomes overdue and stops counting against its
  // limit: a subscriber queued for the origin looks again then, even if no attempt ends.
  clock::time_point origin_recount_at = clock::time_point::max();
  // Batches: on, and whether the ready rows already make a full batch (or cannot grow).
  bool batching = false;
  bool batch_full = true;
  std::optional<clock::time_point> batch_wait_since;
  clock::duration batch_linger{};
  bool stopping = false;
  // zero: a token is there; max: no time known, a grant of the persisted bucket's tokens is
  // awaited (its answer wakes the pump; a rate of 0 is rate_paused).
  clock::duration token_wait{};
};

enum class pump_action {
  wait,                  // until wake_at, or until something notifies the pump
  release_buffered,      // inactive or paused: the rows go back to the queue
  dead_letter_buffered,  // unusable subscriber
  dead_letter_front_too_large,
  dead_letter_front_refused,
  release_front,  // its lease is too short to start it
  queue_for_shard_slot,
  queue_for_origin,
  start_linger,  // a partial batch starts waiting now (then wait)
  send,          // take the token and send the next request
};

struct pump_decision {
  pump_action action = pump_action::wait;
  clock::time_point wake_at = clock::time_point::max();
  bool waits_for_token = false;  // for the token wait metric
};

// In order: rows to clear away first (the subscriber cannot send them, or the front row cannot
// go), then what holds a sendable row back (pause, circuit, its own cap, the shard's cap, the
// origin, a partial batch), then the token.
pump_decision next_pump_step(const pump_facts& facts, clock::time_point now);

// What the demand scan knows about one subscriber.
struct demand_facts {
  bool poll_later = false;  // its last claim came back short and the idle poll has not come
  bool active = true;
  bool unusable = false;
  bool paused = false;  // rate 0 or Retry-After
  bool circuit_blocking = false;
  bool probe_due = false;
  double tokens_now = 0;
  double rate = 0;
  int in_flight_cap = 1;
  int batch_rows = 1;
  bool coalescing = false;
  int held = 0;  // rows buffered plus rows asked for and not yet answered
};

struct demand_limits {
  double horizon_seconds = 0.5;  // rows it can send within this are claimed
  int buffer_per_slot = 2;       // ... but no more than this many per in-flight slot
  int unusable_batch = 64;       // rows of an unusable subscriber claimed to be dead-lettered
  int coalesce_lookahead_rows = 256;
  double coalesce_lookahead_seconds = 20;
};

// Whether a subscriber's claim would start a demand round or join one another started.
enum class claim_round { start, join };

// Rows to ask the storage thread for, at most `budget` (the shard's room); 0 for none, and 0
// while more than half of what it may hold is held (claims come in fewer, larger batches), or
// more than three quarters when it joins a round another subscriber started.
int rows_to_claim(const demand_facts& facts, const demand_limits& limits, int budget,
                  claim_round round = claim_round::start);

// What the token scan knows about one subscriber.
struct token_facts {
  bool has_rows = false;       // rows buffered, waiting to be sent
  bool claim_pending = false;  // rows asked of the storage thread, not yet answered
  bool idle_poll = false;      // that claim polls a subscriber whose last claim came back short
  bool active = true;
  bool unusable = false;
  bool paused = false;  // rate 0 or Retry-After
  bool circuit_blocking = false;
  bool probe_due = false;
};

// Whether a subscriber should hold tokens of its persisted bucket now: it is about to send.
// Not for an idle poll, which mostly finds nothing: the tokens would go back unspent a lease
// later, two writes to its row per poll for every quiet subscriber. Rows a poll finds ask for
// theirs in the next demand round, one storage round trip later; rows other programs queue,
// due now, end the idle poll first when the new-rows check is on, so their claim asks at once.
bool wants_tokens(const token_facts& facts);

// Whether a subscriber's own rate keeps it below one request in flight at the origin's best
// latency (rate x latency < 1): the origin's limit then cannot lighten the origin's load by
// holding it back. False while no latency is known.
bool paced_below_one_slot(double rate, clock::duration origin_best_latency);

// How many waiters a freed slot wakes, at an origin or in the shard: as many as the adaptive
// limit now admits (it may have grown by more than one), or one when the limit is off.
int limit_wakeups(bool limit_enabled, int limit, int in_flight);

// The requests an origin may have in flight by its need (Little's law): its subscribers' rates
// together × the highest latency its adaptive limit takes for no queueing (origin_limit::
// acceptable_latency, twice the best by default), and 4 besides. Its limit doubles while latency
// stays within that, which a partner far away and idle does not stop: without this, a burst of
// tokens takes each origin to whatever it can hold at once, a connection each, and the
// connections outlive the burst by their idle allowance. A latency above the acceptable one
// shrinks the limit itself, so the ceiling binds where the limit soon would.
// INT_MAX before any latency is known or for rates without bound.
int origin_need_ceiling(double rate_sum, clock::duration acceptable_latency);

// The subscribers waiting for a slot (at an origin, or in the shard's in-flight cap), and which
// of them a freed slot goes to: the one that has waited longest, so each gets its turn in the
// order it asked. An entry whose subscriber stopped waiting here since (a URL change moved it
// to another origin) is dropped without taking a slot.
template <class Waiter>
class slot_queue {
 public:
  void push(Waiter* waiter) { waiters_.push_back(waiter); }
  bool empty() const { return waiters_.empty(); }
  std::size_t size() const { return waiters_.size(); }

  // Hands up to `slots` waiters for which `still_waiting(waiter)` holds to `wake(waiter)`,
  // oldest first; returns how many were woken.
  template <class StillWaiting, class Wake>
  int hand_out(int slots, StillWaiting&& still_waiting, Wake&& wake) {
    int woken = 0;
    while (woken < slots && !waiters_.empty()) {
      Waiter* next = waiters_.front();
      waiters_.pop_front();
      if (!still_waiting(*next)) continue;
      wake(*next);
      ++woken;
    }
    return woken;
  }

 private:
  // Its blocks come back from the thread's node cache: used as a FIFO, a deque frees and
  // allocates a block every 64 waiters.
  std::deque<Waiter*, node_cache_allocator<Waiter*>> waiters_;
};

}  // namespace surge::engine::scheduling
