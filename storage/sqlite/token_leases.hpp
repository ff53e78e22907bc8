#pragma once
// Leasing tokens from the persisted buckets of a SQLite queue (storage/token_leases.hpp).
#include <cstdint>
#include <span>
#include <vector>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "storage/sqlite/claims.hpp"
#include "storage/token_leases.hpp"

namespace surge::storage::sqlite {

// Where a shape keeps its persisted buckets: seed000 in webhook_subscriber's own columns,
// seed001 in webhook_buckets (storage/seed001/queue_shape.cpp).
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
  bucket_sharing sharing_;
};

// Gives leased tokens that were not spent back to their buckets, in one BEGIN IMMEDIATE
// transaction: never above a bucket's capacity.
void give_back_tokens(SQLite::Database& db, std::span<const unspent_tokens> tokens, double now,
                      const bucket_statements& statements = seed000_bucket_statements());

}  // namespace surge::storage::sqlite
