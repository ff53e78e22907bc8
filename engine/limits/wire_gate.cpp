#include "engine/limits/wire_gate.hpp"

#include <algorithm>
#include <cmath>

namespace surge::engine {

namespace {

using namespace std::chrono_literals;

// The margin absorbs what lies between our write and the partner's clock. A request on a new
// connection waits on the partner's side for accept() and a first read, a busy host delays either
// side, and nginx compares millisecond-truncated times. So the partner may stamp the request its
// bucket counts from late (the first of a burst, sent at start-up on new connections) and later
// ones on time; and while the backlog lasts, nginx keeps counting from that first request. On a
// loaded two-core host that lateness reached 13 ms in our tests.
constexpr token_bucket::duration max_margin = 50ms;
// With burst >= 2 a write goes only once its token has been whole for the margin: the bucket must
// hold 1 + rate * margin tokens. In a backlog that is paid once: the refill of the margin stays
// in the bucket, so the writes after it are one interval apart and the rate is intact; only the
// first burst's last request(s) may go a margin later. The margin takes at most half the
// bucket's headroom (burst - 1 tokens), so most of a burst still goes at once.
constexpr double headroom_share = 0.5;
// With burst 1 there is no headroom: every gap would grow by the margin. There the margin is
// applied only where the partner is known to stamp late: a request on a new connection is charged
// as if written a margin later. Reused connections (the steady state) pay nothing; a receiver that
// closes every connection pays on every gap, so it is held to 4 % of the interval.
constexpr double share_without_headroom = 0.04;

double seconds(token_bucket::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

wire_gate::wire_gate(double rate_per_sec, double burst, double initial_tokens, time_point now)
    : bucket_(rate_per_sec, burst, initial_tokens, now),
      margin_(margin_for(rate_per_sec, burst)),
      headroom_(bucket_.capacity() >= 2) {}

wire_gate::duration wire_gate::margin_for(double rate_per_sec, double burst) {
  if (rate_per_sec <= 0) return duration::zero();
  const double share = burst >= 2 ? headroom_share * (burst - 1) : share_without_headroom;
  const auto part =
      std::chrono::duration_cast<duration>(std::chrono::duration<double>(share / rate_per_sec));
  return std::min(max_margin, part);
}

wire_gate::duration wire_gate::try_pass(time_point now, bool fresh_connection) {
  if (bucket_.paused()) return duration::max();
  // Tokens never decrease with time and a charge is never earlier than `now`, so whatever passes
  // here would pass a bare bucket at `now` too: the writes always conform; the margin only delays.
  const double needed = tokens_to_pass();
  const auto charged = !headroom_ && fresh_connection ? now + margin_ : now;
  const double tokens = bucket_.tokens_at(now);
  if (tokens >= needed && bucket_.try_take(charged)) return duration::zero();
  // Rounded up and never zero. Short after a charge in the future (the bucket does not refill
  // before it), so the caller may have to ask again.
  const auto wait = std::chrono::duration<double>((needed - tokens) / bucket_.rate());
  return std::max(std::chrono::ceil<duration>(wait), duration::zero()) + duration(1);
}

double wire_gate::tokens_to_pass() const {
  return headroom_ ? std::min(bucket_.capacity(), 1.0 + bucket_.rate() * seconds(margin_)) : 1.0;
}

double wire_gate::admission_lag() const {
  if (!headroom_) return 0.0;
  const double whole_margin_refill = bucket_.rate() * seconds(max_margin);
  return bucket_.capacity() - 1.0 > 2.0 * whole_margin_refill ? tokens_to_pass() - 1.0 : 0.0;
}

void wire_gate::reconfigure(double rate_per_sec, double burst, time_point now) {
  bucket_.reconfigure(rate_per_sec, burst, now);
  margin_ = margin_for(rate_per_sec, burst);
  headroom_ = bucket_.capacity() >= 2;
}

void after_wire_wait(token_bucket& admission, const wire_gate& wire, wire_gate::time_point now) {
  admission.at_most(wire.tokens_at(now) - wire.admission_lag(), now);
}

}  // namespace surge::engine
