#pragma once
// Adaptive concurrency for a whole shard (sans-I/O): requests in flight from one shard, to all
// of its origins together, are capped at a limit that grows while exchanges answer within
// their origin's acceptable latency (origin_limit::acceptable_latency) and shrinks once most of
// them queue.
//
// Each origin's own limit sees queueing at that origin. It cannot see queueing that every
// origin shares (this process's CPU, or a receiver host they all sit on): two hundred origins
// that each start at a few requests already queue behind each other, so each one's best
// latency is measured under that queue and looks normal, and in flight grows to the process cap
// where 88 requests do the same work. This limit starts small for the whole shard,
// so the first exchanges with every origin measure the latency without that queue, and it
// stops growing when more than half of a window's exchanges queue: that is a queue many
// origins share, since one origin's own queue is only its share of the samples. Little's law
// then keeps in flight at throughput x latency: a partner 200 ms away keeps every request it
// needs, because its exchanges do not queue.
#include <chrono>

#include "engine/limits/concurrency_window.hpp"
#include "engine/limits/in_flight_ledger.hpp"

namespace surge::engine {

struct shard_limit_config {
  int initial = 16;
  int minimum = 8;
  std::chrono::milliseconds window{100};
  double growth = 0.125;

  friend bool operator==(const shard_limit_config&, const shard_limit_config&) = default;
};

class shard_limit {
 public:
  using clock = std::chrono::steady_clock;
  using time_point = clock::time_point;
  using duration = clock::duration;
  using ticket = in_flight_ledger::ticket;

  // ceiling: the shard's fixed in-flight cap (its share of --max-in-flight). Disabled, it admits
  // everything and only that cap applies (the origins' limits are off too).
  shard_limit(const shard_limit_config& config, int ceiling, bool enabled, time_point now);

  bool enabled() const { return enabled_; }
  // Whether one more attempt may start: the attempts in flight, less the overdue ones, are
  // below the limit.
  bool admits_at(time_point now) const {
    return !enabled_ || counted_in_flight(now) < window_.limit();
  }
  // An attempt stops counting once it is overdue at its origin (origin_limit::overdue_after, as
  // it was when the attempt started): requests hanging at one host must not hold the shard's
  // slots from the other hosts.
  ticket on_start(time_point now, duration overdue_after);
  void on_end(ticket filed);
  int counted_in_flight(time_point now) const;
  // When the next attempt becomes overdue (time_point::max() if none will).
  time_point next_recount_at(time_point now) const;

  void note_blocked() { window_.note_blocked(); }
  // One exchange answered after `latency`; `acceptable` is its origin's acceptable latency
  // (duration::max() when the origin has none yet: it never counts as queued).
  void on_latency(duration latency, duration acceptable, time_point now);

  int limit() const { return window_.limit(); }
  // An origin's acceptable latency was raised (origin_limit::usual_latency): the decreases its
  // answers caused under the old one are made up (concurrency_window::resume_slow_start).
  void resume_slow_start() { window_.resume_slow_start(); }

 private:
  void end_window(time_point now);

  bool enabled_;
  concurrency_window window_;
  int window_samples_ = 0;
  int window_queued_ = 0;
  double queued_factor_sum_ = 0;  // acceptable / latency over the queued samples
  in_flight_ledger overdue_at_;
};

}  // namespace surge::engine
