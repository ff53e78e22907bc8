#include "storage/sqlite/cycle.hpp"

#include <algorithm>
#include <chrono>

#include <SQLiteCpp/Transaction.h>

#include "proto/clock.hpp"
#include "storage/sqlite/database.hpp"

namespace surge::storage::sqlite {
namespace {

// How soon a drainer asks again for tokens of a subscriber it does not own: about one ownership
// renewal.
constexpr double not_owned_recheck_seconds = 1.0;

}  // namespace

cycle_result write_and_claim(SQLite::Database& db, outcome_applier& writer, claimer& claims,
                             token_leaser& tokens, std::span<const outcome> outcomes,
                             std::span<const std::int64_t> deactivate,
                             std::span<const subscriber_demand> demand, double now,
                             double lease_seconds, std::int64_t max_payload_bytes,
                             const ownership_keeper* owners) {
  const auto called_at = std::chrono::steady_clock::now();
  cycle_result result;
  const bool asks_any = std::any_of(demand.begin(), demand.end(),
                                    [](const auto& d) { return d.rows > 0 || d.tokens != 0; });
  if (outcomes.empty() && deactivate.empty() && !asks_any) return result;
  SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
  // Outcomes first, as when they were separate transactions: a lease given back in this cycle
  // is free for its claim.
  result.written = writer.apply(outcomes, deactivate);
  std::vector<subscriber_demand> owned;
  std::vector<token_grant> not_owned;
  if (owners != nullptr) {
    // Read the clock again under the write lock: the cycle may have waited for it, and another
    // drainer can take a subscriber only in a write transaction of its own.
    const double locked_at = proto::unix_now();
    owned.reserve(demand.size());
    for (const auto& entry : demand) {
      if (owners->owns(entry.subscriber_id, locked_at)) {
        owned.push_back(entry);
      } else if (entry.tokens < 0) {
        owned.push_back({.subscriber_id = entry.subscriber_id, .tokens = entry.tokens});
      } else if (entry.tokens > 0) {
        // Answered, so the asker waits instead of asking in every cycle; the owner may change
        // at the next renewal.
        not_owned.push_back({.subscriber_id = entry.subscriber_id,
                             .tokens = 0,
                             .next_token_at = locked_at + not_owned_recheck_seconds});
      }
    }
    demand = owned;
  }
  result.claimed = claims.claim_within(demand, now, lease_seconds, max_payload_bytes);
  result.more_due = claims.waiting_for_window();
  // Tokens last, at `now` moved on by the time this cycle has taken so far (the wait for the
  // write lock above all): the bucket is stamped as late as it can be before the tokens are
  // spent. Tokens stamped early and sent late overlap the refill another drainer of the bucket
  // spends meanwhile, and the partner sees both.
  const double tokens_at =
      now + std::chrono::duration<double>(std::chrono::steady_clock::now() - called_at).count();
  result.granted = tokens.lease(demand, tokens_at);
  result.granted.insert(result.granted.end(), not_owned.begin(), not_owned.end());
  transaction.commit();
  return result;
}

}  // namespace surge::storage::sqlite
