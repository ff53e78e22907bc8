#pragma once
// Surge's share of the persisted token bucket (docs/design.md, "Handoff with the steady-state
// drainer"). Every drainer of a subscriber spends from webhook_subscriber.tokens: the
// steady-state drainer a token per row, Surge in small leases taken in its storage cycle and
// spent from memory. Together they stay within the partner's limit, and so do several Surge
// processes on one queue. Unspent tokens go back when a drain stops.
#include <cstdint>
#include <span>
#include <string>
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
};

struct unspent_tokens {
  std::int64_t subscriber_id = 0;
  double tokens = 0;
};

}  // namespace surge::storage
