#pragma once
// The slots a shard's attempts take: the shard's (its share of --max-in-flight, under its
// adaptive limit) and each origin's (its adaptive limit, under what its subscribers' rates
// need). A subscriber's pump that finds no slot queues for one; when an attempt ends, the shard's
// freed slot goes to the origin with the fewest in flight and an origin's to its subscriber that
// has waited longest. Sans-I/O: the shard's core passes the clock and notifies the subscribers
// handed a turn.
#include <chrono>
#include <climits>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/config.hpp"
#include "engine/limits/origin_limit.hpp"
#include "engine/limits/shard_limit.hpp"
#include "engine/observe/snapshots.hpp"
#include "engine/shard/scheduling.hpp"
#include "engine/shard/subscriber.hpp"

namespace surge::engine {

// One host:port as a shard sees it: its adaptive concurrency limit, the attempts in flight to
// it, the subscribers waiting for it to admit one more (FIFO), and those of its subscribers
// waiting for a slot of the shard (FIFO; the shard hands its freed slots out by origin).
struct origin_state {
  origin_state(const origin_limit_config& config, origin_limit::time_point now)
      : limit(config, now) {}
  origin_limit limit;
  int in_flight = 0;
  scheduling::slot_queue<subscriber_state> waiting;           // subscribers held back by `limit`
  scheduling::slot_queue<subscriber_state> waiting_for_slot;  // held back by the shard
  bool listed_for_slot = false;  // in shard_slots::origins_waiting_for_slot_
  // Its active subscribers' configured rates together (shard_slots::recount_rates): with its
  // acceptable latency, what it needs in flight (scheduling::origin_need_ceiling).
  double rate_sum = 0;
  // Whether one more attempt may start: the adaptive limit admits it and it is below its need
  // (both counting the attempts in flight that are not overdue).
  bool admits_at(origin_limit::time_point now) const {
    return limit.admits_at(now) && room_by_need(now) > 0;
  }
  int room_by_need(origin_limit::time_point now) const {
    if (!limit.enabled()) return INT_MAX;
    const int ceiling = scheduling::origin_need_ceiling(rate_sum, limit.acceptable_latency());
    return ceiling == INT_MAX ? INT_MAX : ceiling - limit.counted_in_flight(now);
  }
};

class shard_slots {
 public:
  using steady = std::chrono::steady_clock;

  // `in_flight_cap`: the shard's share of --max-in-flight.
  shard_slots(const scheduler_config& config, int in_flight_cap, steady::time_point now);

  // The state of the subscriber's origin (its settings' target), found once per target.
  origin_state& origin_of(subscriber_state& sub, steady::time_point now);
  // The origins' rates, summed again over the active subscribers (after a reload).
  template <typename Subscribers>
  void recount_rates(const Subscribers& subscribers, steady::time_point now) {
    for (auto& [key, origin] : origins_) origin->rate_sum = 0;
    for (auto& [id, sub] : subscribers) {
      if (sub->settings.target && sub->settings.active)
        origin_of(*sub, now).rate_sum += sub->settings.rate;
    }
  }

  // What the pump decides on about slots: the shard's and, with a target, its origin's.
  void describe(scheduling::pump_facts& facts, subscriber_state& sub, steady::time_point now);
  // The pump waits for a slot of the shard, or for its origin to admit one more.
  void queue_for_shard(subscriber_state& sub, steady::time_point now);
  void queue_for_origin(subscriber_state& sub, steady::time_point now);
  // A turn handed to the subscriber that its pump did not take at once is gone.
  void end_turn(subscriber_state& sub);

  // An attempt takes a slot of the shard and of `origin`; what it holds goes back with end().
  struct held {
    origin_limit::ticket origin_ticket;
    shard_limit::ticket shard_ticket = 0;
  };
  held start(subscriber_state& sub, origin_state& origin, steady::time_point now);
  // The origin answered an exchange after `latency` (the origin's and the shard's limits learn).
  void on_latency(origin_state& origin, steady::duration latency, const held& slots,
                  steady::time_point now);
  // The attempt ended: its slots are handed on, and the subscribers handed one go to `woken`.
  void end(origin_state& origin, const held& slots, steady::time_point now,
           std::vector<subscriber_state*>& woken);

  int in_flight() const { return in_flight_; }
  int in_flight_cap() const { return in_flight_cap_; }
  // What the shard admits now, for /metrics.
  int in_flight_limit() const {
    return limit_.enabled() ? std::min(limit_.limit(), in_flight_cap_) : in_flight_cap_;
  }
  // Each origin with subscribers here or attempts in flight, for /metrics.
  std::vector<origin_snapshot> snapshots(std::span<subscriber_state* const> subscribers,
                                         steady::time_point now) const;

 private:
  void wait_for_slot(subscriber_state& sub, steady::time_point now);
  // Freed slots of the shard, `slots` at most, each to a subscriber of the origin with the
  // fewest requests in flight among those waiting.
  void hand_out_slots(int slots, std::vector<subscriber_state*>& woken);
  void wake_origin_waiters(origin_state& origin, steady::time_point now,
                           std::vector<subscriber_state*>& woken);

  origin_limit_config origin_config_;
  int in_flight_ = 0;
  int in_flight_cap_;
  shard_limit limit_;  // adaptive, below in_flight_cap_
  std::unordered_map<std::string, std::unique_ptr<origin_state>> origins_;  // by origin_key
  // Origins with subscribers waiting for a slot of the shard, each at most once; a subscriber
  // waits in one of them at most once.
  std::vector<origin_state*> origins_waiting_for_slot_;
  int slot_waiters_ = 0;    // subscribers with waiting_for_slot set
  int slots_promised_ = 0;  // subscribers with slot_turn set
  std::vector<std::pair<origin_state*, int>> grants_scratch_;  // hand_out_slots' own
};

}  // namespace surge::engine
