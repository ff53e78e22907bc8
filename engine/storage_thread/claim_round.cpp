#include "engine/storage_thread/claim_round.hpp"

#include "engine/storage_thread/claim_replies.hpp"

namespace surge::engine {

claim_round::next claim_round::step(const claim_conditions& now) {
  if (stage_ == stage::fresh) {
    // While the database refuses writes, claiming more would only grow what is held in memory.
    if (!now.claiming || asked_.empty() || now.backing_off) return next::nothing;
    stage_ = stage::written;
    // More outcomes than one batch go first in batches of their own, so the cycle stays short.
    if (now.outcomes_over_one_batch) return next::write_outcomes_first;
  }
  if (stage_ == stage::written) {
    if (now.backing_off || now.queue_lost) {
      // The claim waits for the backoff to end.
      stage_ = stage::fresh;
      return next::nothing;
    }
    demand_.clear();
    for (const auto& [shard, demand] : asked_) {
      demand_.insert(demand_.end(), demand.begin(), demand.end());
    }
    size_.cap(demand_);
    tries_ = 0;
    stage_ = stage::cycling;
  }
  // A retry after a refused row's outcomes were written on their own: not while the database
  // refuses writes, and at most twice in all.
  if (tries_ > 0 && (now.backing_off || now.queue_lost || tries_ >= 2)) return next::answer_empty;
  return next::run_cycle;
}

void claim_round::cycle_started(clock::time_point now, bool with_outcomes) {
  started_ = now;
  with_outcomes_ = with_outcomes;
  ++tries_;
}

std::vector<storage_do::answer_shard> claim_round::answer(std::vector<storage::claimed_row> rows,
                                                          std::vector<storage::token_grant> granted,
                                                          std::vector<std::int64_t> more_due) {
  stage_ = stage::fresh;
  tries_ = 0;
  return claim_replies(std::exchange(asked_, {}), std::move(rows), std::move(granted),
                       std::move(more_due), shard_count_);
}

std::vector<storage_do::answer_shard> claim_round::answer_stopped() {
  std::vector<storage_do::answer_shard> answers;
  for (auto& [shard, demand] : std::exchange(asked_, {})) {
    answers.push_back(storage_do::answer_shard{shard, {std::move(demand), {}}});
  }
  stage_ = stage::fresh;
  tries_ = 0;
  return answers;
}

}  // namespace surge::engine
