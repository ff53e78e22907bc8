#pragma once
// One claim from the shards' asks to their answers: the asks gathered, the outcomes that go
// first when more than a batch waits, the demand capped after statement timeouts (claim_size),
// the tries (a second only after a refused row's outcomes were written on their own), whether
// outcomes rode with the cycle, and the answer split by the shards that asked (claim_replies).
// Pure state: the storage core tells it the conditions of the moment and carries out what it
// says; tests/engine/storage_thread/claim_round_test.cpp drives it alone.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/storage_thread/claim_size.hpp"
#include "engine/storage_thread/storage_actions.hpp"
#include "storage/claims.hpp"

namespace surge::engine {

// What the storage core knows when it looks at the claim.
struct claim_conditions {
  bool claiming = true;                  // the drain still claims
  bool backing_off = false;              // a failure's backoff runs
  bool queue_lost = false;               // the queue file is gone: nothing more is claimed
  bool outcomes_over_one_batch = false;  // more outcomes wait than one batch carries
};

class claim_round {
 public:
  using clock = std::chrono::steady_clock;

  // What the storage core does next for the claim.
  enum class next {
    nothing,               // no claim now: the round goes on to the outcomes
    write_outcomes_first,  // a run of outcome batches, then the claim
    run_cycle,             // the cycle for demand(), after cycle_started()
    answer_empty,          // the claim is given up: each shard gets its demand back, no rows
  };

  explicit claim_round(std::size_t shard_count) : shard_count_(shard_count) {}

  void asked(int shard, std::vector<storage::subscriber_demand> demand) {
    asked_.emplace_back(shard, std::move(demand));
  }
  bool waiting() const { return !asked_.empty(); }

  // Called again after `write_outcomes_first` or `nothing` while the round's claim phase lasts.
  next step(const claim_conditions& now);

  // The cycle under way: what it asks, when it started, whether outcomes ride with it.
  const std::vector<storage::subscriber_demand>& demand() const { return demand_; }
  void cycle_started(clock::time_point now, bool with_outcomes);
  clock::time_point started() const { return started_; }
  bool with_outcomes() const { return with_outcomes_; }

  // The cycle fitted within the statement timeout, or was cancelled by it: the next claim may
  // ask for twice as many rows, or for half of this one's.
  void fitted() { size_.fitted(); }
  void timed_out() { size_.timed_out(demand_); }
  std::size_t most_rows() const { return size_.most_rows(); }

  // The answers, one per shard that asked; the round starts over.
  std::vector<storage_do::answer_shard> answer(std::vector<storage::claimed_row> rows,
                                               std::vector<storage::token_grant> granted,
                                               std::vector<std::int64_t> more_due);
  // Claiming stopped: each shard's demand goes back with nothing, so that it does not wait.
  std::vector<storage_do::answer_shard> answer_stopped();

 private:
  enum class stage { fresh, written, cycling };

  std::size_t shard_count_;
  std::vector<std::pair<int, std::vector<storage::subscriber_demand>>> asked_;
  stage stage_ = stage::fresh;
  std::vector<storage::subscriber_demand> demand_;  // all the asks, capped
  int tries_ = 0;
  bool with_outcomes_ = false;
  clock::time_point started_{};
  claim_size size_;
};

}  // namespace surge::engine
