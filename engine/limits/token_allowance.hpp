#pragma once
// A subscriber's tokens leased from its persisted bucket: what this process
// may spend, whatever its own buckets allow. Several drainers of one subscriber, Surge processes
// or the steady-state drainer, each spend only what they took from the one bucket, so together
// they keep the partner's limit. Sans-I/O: the caller passes monotonic time.
#include <chrono>

namespace surge::engine {

struct token_lease_config {
  // Refill asked for per lease. Larger leases mean fewer writes to the subscriber row; smaller
  // ones leave less unspent in one drainer's hands while another waits.
  double lease_seconds = 1.0;
  // A new lease is asked for once fewer tokens than this much refill are left, so that the
  // storage round trip rarely leaves a subscriber without one. A slower round trip, as measured
  // from the asks' answers, raises it (ahead_seconds()).
  double ask_ahead_seconds = 0.05;
  // After an answer that found the bucket paused (rate 0 in the table), asked again this late.
  std::chrono::milliseconds paused_recheck{1000};

  friend bool operator==(const token_lease_config&, const token_lease_config&) = default;
};

class token_allowance {
 public:
  using clock = std::chrono::steady_clock;

  explicit token_allowance(token_lease_config config = {}) : config_(config) {}

  bool has_token() const { return tokens_ >= 1; }
  void spend(clock::time_point now) {
    tokens_ -= 1;
    last_used_ = now;
  }
  // A token spent for an attempt whose request never went on the wire (its connection failed,
  // or it gave up at the wire gate) comes back: the partner never counted it.
  void refund() { tokens_ += 1; }
  double tokens() const { return tokens_; }

  // Tokens to ask the persisted bucket for now, 0 for none: only at a positive rate, one ask
  // at a time, not before the bucket's next token is due after an empty answer, and once what
  // is left covers less than ask_ahead_seconds. Asking marks the ask as outstanding.
  // While the bucket is shared with another drainer (the last answer said so), only what the
  // subscriber could send at once (`sendable_now` requests) is asked for, and only when the
  // tokens held fall short of it: tokens held while the other drainer spends the refilled
  // bucket would add to what the partner sees.
  double ask(double rate, clock::time_point now, double sendable_now = 0);
  // Whether ask() would ask now, without asking: the demand scan reads this before the
  // subscriber's other facts, which most subscribers holding tokens need not have read.
  bool would_ask(double rate, clock::time_point now, double sendable_now = 0) const;
  // The answer to the outstanding ask. With nothing granted, `next_token_in` says when the
  // bucket's next whole token is due, and no new ask goes before then, nor later than a recheck
  // interval (the rate in the table may change meanwhile; max(): a rate of 0). `shared`: the
  // store saw another drainer spend from the bucket (storage::bucket_sharing).
  void granted(double tokens, clock::time_point now, clock::duration next_token_in,
               bool shared = false);
  bool shared() const { return shared_; }
  // The ask was not answered (the drain stops claiming, or the cycle failed): ask again later.
  void unanswered() { asked_ = false; }
  // The bucket may have tokens for us now although the last answer said to wait (this drain
  // just took the subscriber over): the next ask may go at once.
  void ask_now() { next_ask_at_ = {}; }
  bool asking() const { return asked_; }

  // The refill an ask must cover until its answer is here: the configured look-ahead, or more
  // when the asks' answers have been slower (one and a half round trips, the slowest of the
  // last few) up to half a lease, never less than the configured look-ahead. It sets both when to
  // ask again and how much of the bucket's coming refill the ask may reserve: a bucket with a small
  // burst, left to refill while the answer travels, would fill and lose the rest.
  double ahead_seconds() const;

  // The pump's wait for a token of this allowance: zero when one is here, else max(): the
  // demand scan asks when an ask is due, and the answer wakes the pump.
  clock::duration wait() const {
    return has_token() ? clock::duration::zero() : clock::duration::max();
  }

  // What is left, to give back to the persisted bucket at the end; the allowance is then empty.
  double take_unspent();
  // Tokens nobody spent for a whole lease (the subscriber went idle, paused, or its circuit
  // opened), to give back now; 0 if none. Held on, they would let this process add them to a
  // full bucket's burst later, against the other drainers' share.
  double take_stale(clock::time_point now);

 private:
  token_lease_config config_;
  double tokens_ = 0;
  bool asked_ = false;
  clock::time_point asked_at_{};
  double round_trip_seconds_ = 0;  // rises at once with a slow answer, decays over a few
  clock::time_point next_ask_at_{};
  clock::time_point last_used_{};  // last grant or spend
  bool shared_ = false;            // as the last answer said
};

}  // namespace surge::engine
