#include "storage/cycle.hpp"

#include <algorithm>

#include <SQLiteCpp/Transaction.h>

namespace surge::storage {

cycle_result write_and_claim(SQLite::Database& db, outcome_writer& writer, claimer& claims,
                             token_leaser& tokens,
                             std::span<const outcome> outcomes,
                             std::span<const std::int64_t> deactivate,
                             std::span<const subscriber_demand> demand, double now,
                             double lease_seconds, std::int64_t max_payload_bytes) {
  cycle_result result;
  const bool asks_any = std::any_of(demand.begin(), demand.end(),
                                    [](const auto& d) { return d.rows > 0 || d.tokens != 0; });
  if (outcomes.empty() && deactivate.empty() && !asks_any) return result;
  SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
  // Outcomes first, as when they were separate transactions: a lease given back in this cycle
  // is free for its claim.
  result.written = writer.apply(outcomes, deactivate);
  result.granted = tokens.lease(demand, now);
  result.claimed = claims.claim_within(demand, now, lease_seconds, max_payload_bytes);
  transaction.commit();
  return result;
}

}  // namespace surge::storage
