#pragma once
// The outcomes the shards handed in that the storage thread has not written yet, with the
// subscribers to deactivate (410 Gone): when they are due (commit_timing), what rides with a
// claim, the run that writes them in batches otherwise (outcome_batches), and what another
// session held locked, which waits for a later write. Pure state: the storage core performs
// each write and says how it went.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "engine/storage_thread/commit_timing.hpp"
#include "engine/storage_thread/outcome_batches.hpp"
#include "storage/outcomes.hpp"

namespace surge::engine {

class pending_outcomes {
 public:
  using clock = std::chrono::steady_clock;

  explicit pending_outcomes(const commit_timing& timing) : timing_(timing) {}

  void submitted(std::vector<storage::outcome> outcomes, std::vector<std::int64_t> deactivate);
  std::size_t size() const { return outcomes_.size(); }
  bool empty() const { return outcomes_.empty(); }
  // Whether `arrived` outcomes, just handed in, make a write due at once.
  bool due_with(std::size_t arrived) const {
    return arrived > 0 && arrived + outcomes_.size() >= timing_.rows;
  }
  // Whether what waits is due for a write at `now` (outcomes_due); `force`: the drain is ending
  // or its end is being checked.
  bool due(clock::time_point now, bool force) const;
  // More wait than one batch holds.
  bool over_one_batch() const { return outcomes_.size() > timing_.rows; }
  // The latest lease among what waits: until then a row left unwritten stays fenced.
  double last_lease() const;

  // What rides with a claim (one transaction: storage/cycle.hpp).
  const std::vector<storage::outcome>& outcomes() const { return outcomes_; }
  const std::vector<std::int64_t>& deactivate() const { return deactivate_; }
  // The claim that carried them committed; it began at `began`. What another session held
  // locked waits for a later write. True when rows were held.
  bool written_with_claim(const storage::write_report& report, clock::time_point began);

  // A run of batches, begun at `now`.
  void start_run(clock::time_point now);
  bool running() const { return run_.has_value(); }
  // The run's next batch; nullopt once the run is over (what was held locked waits).
  std::optional<outcome_batches::batch> next_batch();
  // The run in progress: a refused row's dead-letter while it settles (outcome_batches).
  outcome_batches& run() { return *run_; }
  // The batch in progress was written. True when rows were held locked.
  bool batch_written(const storage::write_report& report);
  // The batch in progress was refused for one row's fault (`why`: the database's words).
  outcome_batches::refusal refused(std::string_view why) { return run_->refused(outcomes_, why); }
  // A write of the run failed for a reason not a row's: what was not committed waits for a
  // later run. Returns when the run began.
  clock::time_point run_failed();

 private:
  // Keeps what `report` says another session held: the deactivations, and of `batch` the rows'
  // outcomes (into `held`). True when rows were held.
  bool keep_held(const storage::write_report& report, std::span<const storage::outcome> batch,
                 std::vector<storage::outcome>& held);

  commit_timing timing_;
  std::vector<storage::outcome> outcomes_;
  std::vector<std::int64_t> deactivate_;
  std::optional<outcome_batches> run_;
  clock::time_point last_commit_{};
};

}  // namespace surge::engine
