#pragma once
// The storage cycle (storage/cycle.hpp) on a SQLite queue: one BEGIN IMMEDIATE transaction.
#include <cstdint>
#include <span>
#include <vector>

#include <SQLiteCpp/Database.h>

#include "storage/cycle.hpp"
#include "storage/sqlite/claims.hpp"
#include "storage/sqlite/outcomes.hpp"
#include "storage/sqlite/ownership.hpp"
#include "storage/sqlite/token_leases.hpp"

namespace surge::storage::sqlite {

// One BEGIN IMMEDIATE transaction: outcomes first (fenced, as outcome_writer::write), then the
// tokens the demand asks of persisted buckets, then the claim (as claimer::claim). All commit
// or none does (the exception propagates). `writer`, `claims` and `tokens` must be on `db`.
// With `owners`, rows and tokens are asked only for subscribers it owns when the transaction
// has begun (tokens may still be given back for any): the fence of ownership leases.
cycle_result write_and_claim(SQLite::Database& db, outcome_applier& writer, claimer& claims,
                             token_leaser& tokens, std::span<const outcome> outcomes,
                             std::span<const std::int64_t> deactivate,
                             std::span<const subscriber_demand> demand, double now,
                             double lease_seconds,
                             std::int64_t max_payload_bytes = claimer::no_payload_cap,
                             const ownership_keeper* owners = nullptr);

}  // namespace surge::storage::sqlite
