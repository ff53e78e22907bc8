#pragma once
// Surge's share of the persisted token bucket (docs/design.md, "Handoff with the steady-state
// drainer"). Every drainer of a subscriber spends from webhook_subscriber.tokens: the
// steady-state drainer a token per row, Surge in small leases taken in its storage cycle and
// spent from memory. Together they stay within the partner's limit, and so do several Surge
// processes on one queue. Unspent tokens go back when a drain stops.
#include <cstdint>
#include <span>
#include <vector>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "storage/claims.hpp"

namespace surge::storage {

struct token_grant {
  std::int64_t subscriber_id = 0;
  double tokens = 0;  // whole tokens, at most what was asked; 0 when the bucket had none
  // With nothing granted: when the bucket's next whole token is due (Unix seconds), 0 if never
  // (rate 0) or the subscriber is gone.
  double next_token_at = 0;
};

// Where a shape keeps its persisted buckets: seed000 in webhook_subscriber's own columns,
// seed001 in webhook_buckets (storage/seed001/drain_shape.cpp).
struct bucket_statements {
  // ?1 subscriber id: tokens, updated_at (Unix seconds), refill per second, burst; no row when
  // there is no such subscriber.
  std::string read;
  // ?1 tokens, ?2 updated_at, ?3 subscriber id.
  std::string write;
};
const bucket_statements& seed000_bucket_statements();

class token_leaser {
 public:
  // `reserve_seconds`: refill ahead that may be taken as well (proto::take_tokens).
  token_leaser(SQLite::Database& db, double reserve_seconds,
               const bucket_statements& statements = seed000_bucket_statements());

  // Within the caller's write transaction: for each entry asking for tokens, takes up to that
  // many whole tokens from its persisted bucket (refilled to `now`) and writes what is left.
  // A bucket with nothing to give is read, not written. An entry with tokens below 0 gives
  // that many back (never above the burst) and gets no grant.
  std::vector<token_grant> lease(std::span<const subscriber_demand> demand, double now);

 private:
  SQLite::Statement read_;
  SQLite::Statement write_;
  double reserve_seconds_;
};

struct unspent_tokens {
  std::int64_t subscriber_id = 0;
  double tokens = 0;
};

// Gives leased tokens that were not spent back to their buckets, in one BEGIN IMMEDIATE
// transaction: never above a bucket's capacity.
void give_back_tokens(SQLite::Database& db, std::span<const unspent_tokens> tokens, double now,
                      const bucket_statements& statements = seed000_bucket_statements());

}  // namespace surge::storage
