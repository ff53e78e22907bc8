#pragma once
// Everything that decides when a subscriber's next request may go, in one place: the admission
// bucket (refilled at the adaptive pace), the wire gate (the partner's limit, charged when a
// request goes on the wire), this process's share of the persisted bucket, the adaptive pace, the
// partner's announced quota with the lower limit it sets until its window resets, and a pause
// (Retry-After, a spent quota, a refused target). Sans-I/O: the shard's core passes the clock
// and carries out what each answer asks (a pause's rows rescheduled, the wire line woken).
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "engine/config.hpp"
#include "engine/limits/adaptive_rate.hpp"
#include "engine/limits/partner_quota.hpp"
#include "engine/limits/token_allowance.hpp"
#include "engine/limits/token_bucket.hpp"
#include "engine/limits/wire_gate.hpp"
#include "engine/net/quota_lines.hpp"
#include "engine/observe/snapshots.hpp"
#include "engine/shard/wire_line.hpp"
#include "storage/partner_quotas.hpp"
#include "storage/subscribers.hpp"

namespace surge::engine {

class subscriber_limits {
 public:
  using steady = std::chrono::steady_clock;
  using wall = std::chrono::system_clock;

  // Seeded from the subscriber's persisted bucket; `rate` and `burst` are its limit as the drain
  // uses it (subscriber_settings: none while the table's values are unusable).
  subscriber_limits(const storage::subscriber_row& row, double rate, double burst,
                    steady::time_point now, double now_unix, const scheduler_config& config);

  // The configured limit changed (a reload): applied without resetting tokens; a pace lowered
  // by pushback stays lowered, within the new limit. True when the wire gate's limit changed,
  // so the writers waiting at it look again.
  bool configure(double rate, double burst, steady::time_point now);

  // What an endpoint's answer says of its load: pushback lowers the pace, a delivery raises it.
  // True when the wire gate's limit changed.
  bool on_endpoint(bool pushback, bool delivered, steady::time_point now);

  // What a response announced of the partner's quota, with the subscriber's other requests in
  // flight and the Retry-After honoured for it. Nullopt when it announced nothing; otherwise
  // the pace it sets until `until` (a paused pace is for the caller to carry out with pause()).
  struct announced_step {
    proto::pace_kind kind = proto::pace_kind::configured;
    steady::time_point until{};
    bool gate_changed = false;
    bool first_below_configured = false;  // the first time in this drain: worth one log line
  };
  std::optional<announced_step> on_announced(const quota_lines& lines, int others_in_flight,
                                             std::optional<std::chrono::seconds> retry_after,
                                             wall::time_point said_at, steady::time_point now);
  // The announced limit's window has reset by `now`: the configured limit applies again. True
  // when the wire gate's limit changed.
  bool expire_announced(steady::time_point now);
  // When the announced limit in force ends; nullopt when none is.
  std::optional<steady::time_point> announced_until() const {
    if (!announced_limit_) return std::nullopt;
    return announced_limit_->until;
  }
  // The announcement as kept over its window; nullopt before any.
  const std::optional<proto::announced_quota>& latest_announcement() const {
    return quota_.latest();
  }
  // The latest announcement for /metrics; nullopt before any.
  std::optional<announced_snapshot> announced(wall::time_point now) const;
  // The latest announcement for `surge stats`, once per new one.
  std::optional<storage::partner_quota_row> take_unrecorded(std::int64_t subscriber_id);

  // Nothing goes until `until` (extended, never shortened); `reason` is kept for the operator.
  void pause(steady::time_point until, const char* reason);
  bool paused(steady::time_point now) const { return paused_until_ > now; }
  // Nothing can go however long it waits for a token: a rate of 0 in the table, or a pause.
  bool stopped(steady::time_point now) const { return bucket_.paused() || paused(now); }
  steady::time_point paused_until() const { return paused_until_; }
  const std::string& pause_reason() const { return pause_reason_; }

  // This drain owns the subscriber again: whatever the buckets saved up while another drain
  // owned it was that drain's to spend. Starting empty, the two together send at most
  // burst + rate x T; the allowance asks at once, since "not yours" answers said to wait.
  void taken_over(steady::time_point now) {
    bucket_.empty(now);
    wire_.empty(now);
    allowance_.ask_now();
  }

  // A token from both the admission bucket and this process's allowance, taken together; false
  // (nothing taken) when either has none.
  bool admit(steady::time_point now);
  // The admitted attempt ended without its request going on the wire: the partner never saw
  // it, so the allowance's token comes back (the admission bucket's pace is kept).
  void not_written() { allowance_.refund(); }
  // How long until admit() could succeed.
  steady::duration token_wait(steady::time_point now) const {
    return std::max(bucket_.time_until_available(now), allowance_.wait());
  }
  // The wire line's view: the gate, the bucket it keeps no fuller than what the gate lets pass
  // (after_wire_wait), the pause.
  wire_line::gate_view gate(bool closed) { return {wire_, bucket_, paused_until_, closed}; }

  // Whether its buckets keep filling while it waits `late` past the tokens it waits for (one
  // for the admission bucket, tokens_to_pass at the wire gate): they do while those and what
  // comes in `late` fit below the burst, so being woken that much late costs it no rate. With a
  // burst of 1, or a rate that fills the rest of the burst within `late`, every moment after the
  // tokens is tokens lost.
  bool refills_while_waiting(steady::duration late) const {
    const double refill = std::chrono::duration<double>(late).count();
    return bucket_.capacity() - 1 >= bucket_.rate() * refill &&
           wire_.burst() - wire_.tokens_to_pass() >= wire_.rate() * refill;
  }
  // Below the configured rate because the endpoint pushed back (adaptive pace).
  bool slowed() const { return pace_.effective() < pace_.configured(); }
  const token_bucket& bucket() const { return bucket_; }
  token_allowance& allowance() { return allowance_; }
  const token_allowance& allowance() const { return allowance_; }

 private:
  // Sets the admission bucket and the wire gate from the configured limit, lowered by the
  // announced one while it lasts and, for the bucket, by the adaptive pace.
  bool apply(steady::time_point now);

  struct announced_limit {
    double rate = 0;
    double burst = 1;
    steady::time_point until{};
  };

  double rate_;
  double burst_;
  token_bucket bucket_;
  wire_gate wire_;
  token_allowance allowance_;
  adaptive_rate pace_;
  partner_quota quota_;
  std::optional<announced_limit> announced_limit_;
  bool unrecorded_ = false;  // a newer announcement than `surge stats` was given
  bool noted_ = false;       // the log said once that the partner's quota paces it
  steady::time_point paused_until_{};
  std::string pause_reason_;
};

}  // namespace surge::engine
