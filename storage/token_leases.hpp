#pragma once
// Surge's share of the persisted token bucket (docs/design.md, "Handoff with the steady-state
// drainer"). Every drainer of a subscriber spends from webhook_subscriber.tokens: the
// steady-state drainer a token per row, Surge in small leases taken in its storage cycle and
// spent from memory. Together they stay within the partner's limit, and so do several Surge
// processes on one queue. Unspent tokens go back when a drain stops.
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "storage/claims.hpp"

namespace surge::storage {

struct token_grant {
  std::int64_t subscriber_id = 0;
  double tokens = 0;  // whole tokens, at most what was asked; 0 when the bucket had none
  // With nothing granted: when the bucket's next whole token is due (Unix seconds), 0 if never
  // (rate 0) or the subscriber is gone.
  double next_token_at = 0;
  // What was wrong with the stored bucket, repaired and written back (proto::repaired); empty
  // when nothing was.
  std::string repaired;
  // Another drainer spends from the same bucket (bucket_sharing): nothing was taken ahead of the
  // refill, and the asker should hold no more than it sends at once.
  bool shared = false;
};

// Whether another drainer spends from a subscriber's persisted bucket: it wrote the bucket since
// this drain last did. Tokens one drainer holds while the other spends the refilled bucket add
// to what the partner sees, so a shared bucket is leased without a reserve and in asks no larger
// than what the asker can send at once. Remembered for a while after the last foreign write
// seen: the other drainer may be between rows. Pure: the caller passes the time in.
class bucket_sharing {
 public:
  static constexpr double remember_seconds = 10;

  // The bucket as stored, read in the write transaction: whether it is shared now.
  bool read(std::int64_t subscriber, double tokens, double updated_at, double now) {
    auto& entry = entries_[subscriber];
    // Bit for bit: a database returns the double this drain wrote. (A NaN never equals itself;
    // it is repaired and written once, then compares as written.)
    if (entry.written && (tokens != entry.tokens || updated_at != entry.updated_at)) {
      entry.shared_until = now + remember_seconds;
    }
    return now < entry.shared_until;
  }
  void wrote(std::int64_t subscriber, double tokens, double updated_at) {
    auto& entry = entries_[subscriber];
    entry.written = true;
    entry.tokens = tokens;
    entry.updated_at = updated_at;
  }

 private:
  struct entry {
    bool written = false;
    double tokens = 0;
    double updated_at = 0;
    double shared_until = 0;
  };
  std::unordered_map<std::int64_t, entry> entries_;
};

struct unspent_tokens {
  std::int64_t subscriber_id = 0;
  double tokens = 0;
};

}  // namespace surge::storage
