#pragma once
// One run of writing the outcomes the storage thread holds, in batches of at most `batch_rows`,
// with the subscribers to deactivate riding in the first. A batch the database refuses for one
// row's fault (storage::error::kind::row_rejected) is halved until the refused row is alone: the
// others go on, and the row is dead-lettered with the reason or, failing that, quarantined
// (refused_rows). Pure state over the core's pending outcomes, which stay in place during the
// run: the storage core performs each write and says how it went.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "storage/outcomes.hpp"

namespace surge::engine {

class outcome_batches {
 public:
  using clock = std::chrono::steady_clock;

  struct batch {
    std::span<const storage::outcome> outcomes;
    std::span<const std::int64_t> deactivate;
  };
  // How the run goes on after a batch was refused for one row's fault.
  struct refusal {
    enum class kind {
      smaller_batch,         // the batch is split further
      deactivation_refused,  // the deactivations alone were refused: dropped, they stay active
      dead_letter,           // one row's outcome was refused: its dead-letter is the next write
      quarantine,            // one row's refused outcome has no dead-letter to try
    } what = kind::smaller_batch;
    std::int64_t delivery_id = 0;  // the refused row (dead_letter, quarantine)
    std::string reason;
  };

  outcome_batches(std::size_t batch_rows, std::vector<std::int64_t> deactivate,
                  clock::time_point began);

  clock::time_point began() const { return began_; }
  // The next write of `pending` (the same outcomes all through the run), or nullopt once every
  // batch was written.
  std::optional<batch> next(std::span<const storage::outcome> pending);

  // The batch in progress was written: the run goes past it. Returns it, to find the rows another
  // session holds locked, whose outcomes go to held().
  std::span<const storage::outcome> written(std::span<const storage::outcome> pending);
  // The batch in progress was refused for one row's fault (`why`: the database's words).
  refusal refused(std::span<const storage::outcome> pending, std::string_view why);
  // The dead-letter of a refused row while it is the write in progress; nullptr otherwise.
  const storage::outcome* settling() const { return settling_ ? &*settling_ : nullptr; }
  const std::string& settle_reason() const { return settle_reason_; }
  // The dead-letter was written, or refused too (the row is quarantined): the run goes past it.
  void settled();

  // Outcomes of rows another session holds locked: a later run writes them.
  std::vector<storage::outcome>& held() { return held_; }
  // The run is over: `pending` keeps only the held outcomes.
  void end(std::vector<storage::outcome>& pending) { pending = std::move(held_); }
  // A write failed for a reason not a row's: what was not committed goes back to `pending` and
  // `deactivate` for a later run. Batches committed before are not written again (their fences
  // would fail as lost leases, their attempts be recorded twice). Returns whether any were.
  bool give_back(std::vector<storage::outcome>& pending, std::vector<std::int64_t>& deactivate);

 private:
  std::size_t full_;
  std::size_t limit_;
  std::size_t offset_ = 0;  // outcomes committed (or settled) so far
  std::size_t count_ = 0;   // outcomes in the batch being written
  std::vector<storage::outcome> held_;
  std::vector<std::int64_t> deactivate_;
  std::optional<storage::outcome> settling_;
  std::string settle_reason_;
  clock::time_point began_;
};

}  // namespace surge::engine
