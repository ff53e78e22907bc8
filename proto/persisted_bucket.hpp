#pragma once
// The persisted token bucket: the columns `tokens` and
// `tokens_updated_at` of webhook_subscriber, read the way the steady-state drainer reads them.
// Every drainer of a subscriber spends from it, Surge in small leases, so together they stay
// within the partner's limit. Pure arithmetic on Unix seconds; storage/ reads and writes it.

#include <string>

namespace surge::proto {

struct persisted_bucket {
  double tokens = 0;      // as of updated_at
  double updated_at = 0;  // Unix seconds
  double rate = 0;        // tokens per second; <= 0: no refill (paused)
  double burst = 1;       // capacity, at least one token
};

// A stored bucket no drainer could have written: stamped ahead of `now` by more than hosts'
// clocks drift apart (another host's clock an hour ahead, a bad write), stamped with no number,
// holding a count that is no number, or a debt deeper than any drainer reserves. Left as it is,
// such a bucket gives its subscriber nothing for as long as the stamp or the debt says, and
// nothing says why. Read instead as stamped `now`, with no debt deeper than that bound and a
// count that is not a number as a full bucket; `why` names what was repaired (empty: nothing).
struct bucket_repair {
  persisted_bucket bucket;
  std::string why;
};
inline constexpr double bucket_clock_skew_seconds = 5;
inline constexpr double bucket_debt_seconds = 60;  // of refill, beyond one burst
bucket_repair repaired(const persisted_bucket& bucket, double now);

// The bucket's tokens at `now`: the stored count plus the refill since `updated_at`, never above
// capacity. A count below zero (another drainer's debt) is kept, and a time in the future adds
// nothing. A stored count that is not a number reads as a full bucket.
double tokens_at(const persisted_bucket& bucket, double now);

struct token_take {
  double taken = 0;  // whole tokens, at most what was asked
  double left = 0;   // the bucket's tokens after the take, to be written with `now`
  // When nothing could be taken: when the next whole token will be there (Unix seconds), or 0
  // when never (rate <= 0).
  double next_token_at = 0;
};

// Takes up to `want` whole tokens (`want` is rounded up) from what the bucket holds at `now`
// plus the refill of the next `reserve_seconds`: the taker spends no faster than the rate, and
// at a burst of 1 a bucket that waited full for the taker's next round trip would lose its
// refill. What is reserved shows as a debt (tokens below zero) that refill pays off.
token_take take_tokens(const persisted_bucket& bucket, double want, double now,
                       double reserve_seconds = 0);

// The stamp a write of the bucket carries: `now`, or the stored stamp when that is later. A
// drainer that read its clock before it waited for the write lock must not stamp the bucket
// earlier than the drainer that wrote meanwhile: the refill between the two stamps would be
// counted, and handed out, twice.
double stamp_for_write(const persisted_bucket& bucket, double now);

// Tokens taken and not spent go back: the bucket at `now` plus `unspent`, never above capacity.
double give_back(const persisted_bucket& bucket, double unspent, double now);

}  // namespace surge::proto
