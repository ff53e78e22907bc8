// The outcomes waiting to be written (engine/storage_thread/pending_outcomes.hpp).
#include "engine/storage_thread/pending_outcomes.hpp"

#include <algorithm>
#include <iterator>
#include <unordered_set>
#include <utility>

namespace surge::engine {

void pending_outcomes::submitted(std::vector<storage::outcome> outcomes,
                                 std::vector<std::int64_t> deactivate) {
  if (outcomes_.empty()) {
    outcomes_ = std::move(outcomes);
  } else {
    std::move(outcomes.begin(), outcomes.end(), std::back_inserter(outcomes_));
  }
  deactivate_.insert(deactivate_.end(), deactivate.begin(), deactivate.end());
}

bool pending_outcomes::due(clock::time_point now, bool force) const {
  const bool frees_key = std::any_of(outcomes_.begin(), outcomes_.end(),
                                     [](const storage::outcome& o) { return o.frees_key; });
  return outcomes_due(timing_, outcomes_.size(), !deactivate_.empty(), now - last_commit_, force,
                      frees_key);
}

double pending_outcomes::last_lease() const {
  double last = 0;
  for (const auto& outcome : outcomes_) last = std::max(last, outcome.lease);
  return last;
}

bool pending_outcomes::written_with_claim(const storage::write_report& report,
                                          clock::time_point began) {
  std::vector<storage::outcome> held;
  deactivate_.clear();
  const bool rows_held = keep_held(report, outcomes_, held);
  outcomes_ = std::move(held);
  last_commit_ = began;
  return rows_held;
}

void pending_outcomes::start_run(clock::time_point now) {
  run_.emplace(timing_.rows, std::exchange(deactivate_, {}), now);
}

std::optional<outcome_batches::batch> pending_outcomes::next_batch() {
  if (auto batch = run_->next(outcomes_)) return batch;
  // The run ended: what another session held locked waits for a later batch.
  run_->end(outcomes_);
  last_commit_ = run_->began();
  run_.reset();
  return std::nullopt;
}

bool pending_outcomes::batch_written(const storage::write_report& report) {
  return keep_held(report, run_->written(outcomes_), run_->held());
}

pending_outcomes::clock::time_point pending_outcomes::run_failed() {
  auto run = std::move(*run_);
  run_.reset();
  if (run.give_back(outcomes_, deactivate_)) last_commit_ = run.began();
  return run.began();
}

bool pending_outcomes::keep_held(const storage::write_report& report,
                                 std::span<const storage::outcome> batch,
                                 std::vector<storage::outcome>& held) {
  deactivate_.insert(deactivate_.end(), report.held_subscribers.begin(),
                     report.held_subscribers.end());
  if (report.held_rows.empty()) return false;
  const std::unordered_set<std::int64_t> ids(report.held_rows.begin(), report.held_rows.end());
  for (const auto& outcome : batch) {
    if (ids.contains(outcome.delivery_id)) held.push_back(outcome);
  }
  return true;
}

}  // namespace surge::engine
