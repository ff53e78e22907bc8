#pragma once
// The limit charged where the partner measures it: when a request goes on the wire
// (docs/design.md, "Conformance"). Sans-I/O: the caller passes monotonic time.
//
// The pump's bucket admits attempts; this one is charged right before each request is written,
// after connect and TLS. A partner's limiter (nginx limit_req) counts arrivals, so a burst that
// waited for new connections and a next request that left at once on an open one would arrive
// closer together than the bucket allowed if the charge were taken when the attempt started.
#include <chrono>

#include "engine/limits/token_bucket.hpp"

namespace surge::engine {

class wire_gate {
 public:
  using time_point = token_bucket::time_point;
  using duration = token_bucket::duration;

  // The subscriber's configured rate and burst (not the adaptive pace: this is the partner's
  // published limit, the hard cap), seeded like the admission bucket.
  wire_gate(double rate_per_sec, double burst, double initial_tokens, time_point now);

  // Zero when the write may go now, and the token is taken; otherwise how long to wait before
  // asking again (nothing taken). duration::max() while the rate is 0 (paused).
  // `fresh_connection`: the request is the first on a new connection.
  duration try_pass(time_point now, bool fresh_connection = false);

  // New limits apply from `now` without resetting tokens (clamped to the new burst).
  void reconfigure(double rate_per_sec, double burst, time_point now);

  // No token left at `now` (refill continues from there).
  void empty(time_point now) { bucket_.empty(now); }
  double tokens_at(time_point t) const { return bucket_.tokens_at(t); }
  double rate() const { return bucket_.rate(); }
  double burst() const { return bucket_.capacity(); }
  // The safety margin against the partner's clock (see wire_gate.cpp): with burst >= 2, how
  // long a token must have been whole before a write that waited for it goes; with burst 1, how
  // much later than written a request on a new connection is charged.
  duration margin() const { return margin_; }

  // The margin for a limit (see wire_gate.cpp for why these numbers).
  static duration margin_for(double rate_per_sec, double burst);
  // The tokens a write needs to pass: one, and with burst >= 2 the margin's refill besides.
  double tokens_to_pass() const;
  // What after_wire_wait holds the admission bucket back by, below the gate's tokens: the
  // margin's refill where the burst holds twice the whole margin's refill besides a token, else
  // nothing (see after_wire_wait).
  double admission_lag() const;

 private:
  token_bucket bucket_;
  duration margin_;
  bool headroom_;  // burst >= 2
};

// After a write that had to wait at the gate: the bucket that admits attempts keeps no more
// tokens than the wire's, less wire.admission_lag(). Admitting on its own schedule while the
// writes lag it would only queue attempts at the gate, and with a burst of 1 the lag never
// shrinks (no write may follow the one before sooner than the limit allows), so every later
// attempt would wait as long as the longest lag so far: recorded as time added to it (bench
// scenario half_rate). Kept level with the wire's tokens alone, the bucket admits each attempt of
// a backlog a margin before the gate lets it pass, and every request holds its connection and
// its in-flight slot at the gate for the margin: 500 more requests in flight for 1,000
// subscribers at 10/s (bench/origins.py slow_partners). Less the margin's refill, the bucket
// admits when the gate will pass; but then a write that comes late (a new connection's connect)
// finds the gate filling towards its burst with only burst - tokens_to_pass of room, not burst -
// 1, and past it the refill is lost. So the lag is taken only where the burst holds twice the
// whole margin's refill besides a token (10/s with a burst of 10: 850 ms of room instead of
// 900); a small burst (2 at 10/s, 3 at 100/s), whose margin is cut to half its room, keeps the
// margin's lead.
void after_wire_wait(token_bucket& admission, const wire_gate& wire, wire_gate::time_point now);

}  // namespace surge::engine
