#pragma once
// A shard's core, without I/O: its subscribers and the order its rules apply in. It takes events
// (subscribers loaded, rows claimed, a connection ready to write, a response, a timer, a stop)
// with the time they happen at, runs each subscriber's pump and wire line, and answers with
// actions (claim these rows, send this request, let this write go, write these outcomes) and the
// time it next wants to be woken. Each concern with state of its own is a small machine it owns:
// the demand (demand_planner), the slots (shard_slots), the wakes (wake_schedule), the rows and
// their outcomes (shard_rows), the attempts (attempt_book), each subscriber's pump
// (subscriber_pump), and what an attempt's end does (attempt_settlement). The reactor
// (engine/shard/shard.hpp) performs the actions with Asio; the tests drive the core on a simulated
// clock (tests/engine/shard/core_test.cpp).
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/config.hpp"
#include "engine/net/http_result.hpp"
#include "engine/observe/counters.hpp"
#include "engine/observe/log.hpp"
#include "engine/observe/metrics.hpp"
#include "engine/shard/attempts.hpp"
#include "engine/shard/shard_actions.hpp"
#include "engine/shard/delivery.hpp"
#include "engine/shard/demand_planner.hpp"
#include "engine/shard/scheduling.hpp"
#include "engine/shard/settlement.hpp"
#include "engine/shard/shard_rows.hpp"
#include "engine/shard/slots.hpp"
#include "engine/shard/subscriber_pump.hpp"
#include "engine/shard/subscriber.hpp"
#include "engine/shard/wakes.hpp"
#include "engine/handoff.hpp"

namespace surge::engine {

class shard_core {
 public:
  using steady = std::chrono::steady_clock;

  // `seed` drives the backoff's jitter; what the core has to say goes to `logger`.
  shard_core(int index, int shard_count, const drain_config& config, drain_metrics& metrics,
             core_log& logger, std::uint64_t seed, shard_time now);
  // Its machines hold references into it (its subscribers, its actions).
  shard_core(const shard_core&) = delete;
  shard_core& operator=(const shard_core&) = delete;

  // Events. Each takes the time it happens at; its actions are in actions() afterwards.
  // The subscribers (re)loaded, with the client identity each one's certificate files gave
  // (one per row; an empty identity and problem for none).
  void on_subscribers(std::vector<storage::subscriber_row> rows,
                      std::vector<identity_lookup> identities, shard_time now);
  void on_claimed(claim_reply reply, shard_time now);
  void on_new_rows(const std::vector<std::int64_t>& subscriber_ids, bool all, shard_time now);
  void on_taken(const std::vector<std::int64_t>& subscriber_ids, shard_time now);
  void on_disowned(const std::vector<std::int64_t>& subscriber_ids, shard_time now);
  // An attempt's connection is open and its request ready to write (`fresh_connection`: the
  // first on a new connection). The answer at once when there is one (true: write; false: give
  // up); nullopt: a write_verdict comes later, in actions().
  std::optional<bool> on_write_ready(attempt_id attempt, bool fresh_connection, shard_time now);
  // The attempt's exchange is over (or never began: result.not_sent). `request` is its buffer.
  void on_response(attempt_id attempt, const http_result& result, std::string request,
                   shard_time now);
  // The time next_wake() named has come (calling it early does no harm).
  void on_timer(shard_time now);
  // Stop: give buffered rows back, let in-flight attempts finish, hand buckets back.
  void begin_stop(shard_time now);
  // After the grace period: finish at once; attempts still in flight keep their leases.
  void abandon(shard_time now);

  const shard_actions& actions() const { return out_; }
  shard_actions& actions() { return out_; }
  void clear_actions();
  // When the core next wants on_timer: the earliest pump, wire line, demand round or flush, on
  // the wake grid (scheduler_config::wake_grid).
  steady::time_point next_wake() const;
  bool finished() const { return finished_; }
  int in_flight() const { return slots_.in_flight(); }
  int buffered() const { return rows_.buffered(); }

 private:
  // Every event begins and ends with these: the clock is read once, and whatever the event
  // changed is looked at again before it returns (queued pumps and wire lines, a quiet stop).
  // False once the core has finished: the event then changes nothing.
  bool begin_event(shard_time now) {
    now_ = now;
    return !finished_;
  }
  void end_event();

  void update_subscribers(std::vector<storage::subscriber_row> rows,
                          std::vector<identity_lookup> identities);
  // The subscriber's wire line at now_: verdicts out, and when to look again.
  void run_line(subscriber_state& sub);
  wire_line::gate_view gate_of(subscriber_state& sub) {
    return sub.limits.gate(stopping_ || sub.disowned);
  }
  // Anything that changes what the pump can do queues it; it runs before the event returns.
  void notify(subscriber_state& sub) {
    if (!finished_) wakes_.queue_pump(sub);
  }
  // Limits, a pause or the stop changed: the writers at the subscriber's gate look again.
  void notify_line(subscriber_state& sub) { wakes_.queue_line(sub); }

  // Attempts (attempt.cpp): settled by attempt_settlement, then ended here.
  void settle_attempt(attempt_state& attempt, const http_result& result);
  // The planner's next claim, if it has one, goes out (demand.cpp).
  void send_demand();
  void wake_subscribers(const std::vector<std::int64_t>& ids, bool all);
  // An ordered row finished: its outcome goes now and a claim follows it, so the key's next row
  // comes one storage cycle later instead of at the subscriber's idle poll.
  void claim_after_key_freed(subscriber_state& sub);
  void attempt_ended(attempt_state& attempt);
  // The gate's verdict for an attempt: one that goes on the wire keeps its allowance token.
  void judged_at_gate(attempt_id id, bool go);
  void hand_over_quotas();
  void finish();
  void finish_if_quiet();
  void publish_metrics();
  // The core's warnings, through the logger it was handed.
  void warn(std::string line) { logger_.write(log_level::warn, std::move(line)); }

  int index_;
  drain_config config_;
  drain_metrics& metrics_;
  drain_counters& counters_;
  core_log& logger_;
  shard_time now_;
  shard_actions out_;
  shard_rows rows_;  // the rows buffered here and the outcomes they leave with

  subscriber_map subscribers_;
  demand_planner demand_;  // what the storage thread is asked for, and when each is polled
  shard_slots slots_;      // the shard's and its origins' in-flight slots, and who waits for them
  std::vector<subscriber_state*> woken_scratch_;  // handed a slot as an attempt ended

  attempt_book attempts_;
  wake_schedule wakes_;  // pumps and wire lines to look at again, now or at a time
  attempt_settlement settlement_;
  subscriber_pump pump_;
  steady::time_point next_demand_at_;
  steady::time_point next_flush_at_;
  steady::time_point next_publish_at_;

  bool stopping_ = false;
  bool finished_ = false;
  // Scratch kept between events, so that a steady stream allocates nothing: the subscribers a
  // claim's answer wakes, and those its rows joined.
  std::vector<subscriber_state*> answered_scratch_;
  std::vector<subscriber_state*> joined_scratch_;
};

}  // namespace surge::engine
