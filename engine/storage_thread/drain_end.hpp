#pragma once
// How the storage thread ends a drain, once every shard has handed its unspent tokens back:
// the outcomes still held are written, then the announced quotas (whatever the backoff), then the
// tokens go back to the persisted buckets; with every outcome written, the rows left are counted
// for the report, ownership is released and the thread finishes. Outcomes the database does not
// take yet are tried again after the error backoff, until it takes them or the stop's deadline
// passes (abandon()): then the report says how many were left to their leases. Pure state: the
// storage core asks for the next step and performs it, skipping a step with nothing to do.
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "storage/token_leases.hpp"

namespace surge::engine {

class drain_end {
 public:
  enum class step {
    wait,               // not every shard is done: the round ends, the loop sleeps
    write_outcomes,     // every outcome held, in batches
    write_quotas,       // the latest announced quotas, dropped if refused
    give_back_tokens,   // the shards' unspent tokens
    count_remaining,    // the rows still due or leased, for the report
    retry_later,        // outcomes are left: the round ends, the next try after the backoff
    release_ownership,  // unless the stop released it already
    give_up,            // abandoned with outcomes left: report them unwritten and finish
    report,             // finish with the rows remaining
  };

  // The drain ends once `shards_expected` shards have returned their tokens.
  void finish(int shards_expected) { shards_expected_ = shards_expected; }
  // A shard finished and handed back the leased tokens it did not spend.
  void tokens_returned(std::vector<storage::unspent_tokens> tokens) {
    unspent_.insert(unspent_.end(), tokens.begin(), tokens.end());
    ++shards_returned_;
  }
  // At give_back_tokens: the tokens returned since the last give-back (a retried end does not
  // give them twice, and what a failed give-back loses is kept by nobody: the partner gets fewer
  // requests for a moment). They stay here, where the action's span points, until the end; no
  // shard returns tokens while the storage thread performs the action.
  std::span<const storage::unspent_tokens> tokens_to_give_back() {
    const auto from = std::exchange(tokens_given_, unspent_.size());
    return std::span<const storage::unspent_tokens>(unspent_).subspan(from);
  }
  // The stop's deadline passed: outcomes not yet written are left to their leases.
  void abandon() { abandoned_ = true; }
  void remaining_counted(std::int64_t remaining) { remaining_ = remaining; }

  // The next step; `outcomes_left`: outcomes are held that the database has not taken.
  step next(bool outcomes_left);
  // The drain's end was reported (give_up or report).
  bool ended() const { return ended_; }
  // Rows still due or leased at the end; -1: unknown (not counted, or the count failed).
  std::int64_t remaining() const { return remaining_; }

 private:
  enum class stage { outcomes, quotas, tokens, written, release, report };

  int shards_expected_ = -1;
  int shards_returned_ = 0;
  bool abandoned_ = false;
  bool ended_ = false;
  stage stage_ = stage::outcomes;
  std::int64_t remaining_ = -1;
  std::vector<storage::unspent_tokens> unspent_;
  std::size_t tokens_given_ = 0;  // of unspent_, the tokens given back so far
};

}  // namespace surge::engine
