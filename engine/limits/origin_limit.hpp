#pragma once
// Adaptive concurrency per origin (sans-I/O), in the spirit of TCP Vegas: requests in flight to
// one host:port are capped at a limit that grows while latency stays near the best seen (or,
// for a partner whose answers vary widely, near its usual latency) and shrinks in proportion
// once latency says requests are queueing (at the endpoint, or in this process when the CPU is
// the bottleneck). Slow endpoints keep every slot they can use; a fast
// one stops being sent 1,600 requests at once when 100 suffice, and an endpoint that slows down
// under load gets less concurrency instead of more queueing.
#include <chrono>

#include "engine/limits/concurrency_window.hpp"
#include "engine/limits/in_flight_ledger.hpp"

namespace surge::engine {

struct origin_limit_config {
  // 0 turns the limit off (only the per-subscriber and process caps apply).
  double latency_tolerance = 2.0;  // allowed: tolerance * best latency + slack
  // For a fast origin the slack, not the tolerance, sets how much may queue: on loopback nginx
  // (best latency about 0.1 ms) 5 ms let about 230 requests wait in flight, 2 ms about 110, for
  // a tenth more deliveries per CPU second on both sides. A partner tens of milliseconds away is
  // governed by the tolerance either way.
  std::chrono::microseconds latency_slack{std::chrono::milliseconds(2)};
  // Small, like TCP's initial window: the best latency is first measured without a burst of our
  // own requests queueing in front of it, which would make queueing look normal. Each request
  // in flight is a connection: at 200 origins on one nginx, 8 at the start and 4 at least kept
  // about 1,000 connections open for 35 requests in flight, against 520-590 with 4 and 2
  // (bench/origins.py). Slow start still takes a partner 200 ms away to a hundred requests in
  // two round trips (concurrency_window). Not 2 at the start: a subscriber whose two requests
  // hang would hold its origin's other subscribers until they are overdue.
  int initial = 4;
  int minimum = 2;
  std::chrono::milliseconds window{100};  // the limit moves at most once per window
  // The best latency is the minimum over the last one to two of these periods, so an endpoint
  // that became slower for good is judged against its new normal after at most two periods.
  std::chrono::milliseconds best_latency_period{std::chrono::seconds(5)};
  // Per window while the limit binds and latency is good: doubling until the first decrease
  // (slow start, so a 200 ms endpoint gets thousands of slots within a second or two), then
  // this fraction.
  double growth = 0.125;
  // An attempt in flight longer than overdue_factor x the best latency (at least overdue_floor;
  // overdue_unknown before any latency is known) stops counting against the limit: requests
  // hanging at one subscriber's path must not hold the host's slots from the others.
  double overdue_factor = 10;
  std::chrono::milliseconds overdue_floor{250};
  std::chrono::milliseconds overdue_unknown{std::chrono::seconds(1)};
  // A partner's answers may vary widely from one request to the next (50 ms and 500 ms by
  // turns) without any queueing: its usual latency is the mean latency, plus two standard
  // errors, of a sample of exchanges that started with fewer than `unqueued_below` in flight at
  // the origin, none of them behind our own requests. The origin's first requests are such (its
  // limit starts at `initial`), and so are requests while demand is low; after a sample that
  // measured a queue (origin_limit::sample_measured_a_queue), the next is taken whatever is in
  // flight. The usual latency is the higher of the last two samples'. A sample is taken by
  // start, at most `usual_latency_samples` of them, and is complete when all have ended with at
  // least `usual_latency_answers` answers: the fast ones end first, and a mean without the slow
  // ones would be the best latency again.
  int unqueued_below = 8;
  int usual_latency_samples = 16;
  int usual_latency_answers = 4;

  friend bool operator==(const origin_limit_config&, const origin_limit_config&) = default;
};

// What origin_limit::on_start hands out for one attempt.
struct origin_limit_ticket {
  in_flight_ledger::ticket filed = 0;
  bool sampled = false;  // one of the exchanges that measure the usual latency
};

class origin_limit {
 public:
  using clock = std::chrono::steady_clock;
  using time_point = clock::time_point;
  using duration = clock::duration;

  explicit origin_limit(origin_limit_config config, time_point now);

  bool enabled() const { return config_.latency_tolerance > 0; }
  bool admits(int counted) const { return !enabled() || counted < window_.limit(); }
  // Whether one more attempt may start: the attempts in flight (on_start, on_end), less the
  // overdue ones, are below the limit.
  bool admits_at(time_point now) const {
    return !enabled() || counted_in_flight(now) < window_.limit();
  }

  // In-flight accounting by start time (in_flight_ledger). on_start's ticket goes back to
  // on_latency (if the exchange was answered) and then to on_end.
  using ticket = origin_limit_ticket;
  ticket on_start(time_point now);
  void on_end(const ticket& started);
  int counted_in_flight(time_point now) const;
  // When the next attempt in flight becomes overdue (time_point::max() if none will): a
  // subscriber waiting for this origin looks again then, even if nothing ends.
  time_point next_recount_at(time_point now) const;
  duration overdue_after() const;
  // A request could not start because of this limit: growth is only earned under demand.
  void note_blocked() { window_.note_blocked(); }
  // One exchange finished with a response (any status); failures before a response say nothing
  // about queueing and are not fed in.
  void on_latency(duration latency, time_point now, const ticket& started = {});

  int limit() const { return window_.limit(); }
  duration best_latency() const;
  // The mean plus two standard errors of a complete sample of exchanges started with few in
  // flight: the latest sample's, or the one before where that is higher and did not measure a
  // queue (duration::zero() until one is complete).
  duration usual_latency() const;
  // The latency above which an exchange counts as queued: tolerance x best latency + slack, or
  // tolerance x the usual latency where that is higher, the best is above the slack, and the
  // usual's sample had an answer within tolerance x best (judged_by_usual; duration::max()
  // before any latency is known).
  duration acceptable_latency() const;
  // Whether the usual latency, not the best, sets the acceptable latency.
  bool judged_by_usual() const;

 private:
  void end_window(time_point now);
  void end_sample_member();
  // Whether the latest complete sample measured a queue (measured_a_queue).
  bool sample_measured_a_queue() const;
  duration by_best() const;  // tolerance x best latency + slack

  // The sample of exchanges that measures the usual latency: members started, ended, and the
  // latencies of those answered.
  struct usual_sample {
    int started = 0;
    int ended = 0;
    int answered = 0;
    double sum = 0;  // seconds
    double sum_of_squares = 0;
    duration fastest = duration::max();
  };
  // A complete sample's usual latency and its fastest answer.
  struct usual_measure {
    duration latency{};
    duration fastest = duration::max();  // none: no sample yet
  };
  // Its fastest answer is beyond tolerance x best: the sample measured a queue.
  bool measured_a_queue(const usual_measure& measure) const;

  origin_limit_config config_;
  concurrency_window window_;
  duration best_current_ = duration::max();   // minimum in the running period
  duration best_previous_ = duration::max();  // minimum in the period before
  time_point period_start_;
  duration window_sum_{};
  int window_samples_ = 0;
  in_flight_ledger started_;
  usual_sample sample_;
  usual_measure usual_;         // the latest complete sample's
  usual_measure usual_before_;  // the one before it
};

}  // namespace surge::engine
