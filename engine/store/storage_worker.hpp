#pragma once
// The storage thread: the one connection of a drain that claims and writes
// (storage/drain_store.hpp, a SQLite file or PostgreSQL). Shards hand it claim requests and outcome
// batches; it answers claims, pushes subscriber settings back and wakes shards when other
// programs queue rows.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "engine/config.hpp"
#include "engine/handoff.hpp"
#include "engine/observe/counters.hpp"
#include "engine/observe/metrics.hpp"
#include "engine/store/backlog_watch.hpp"
#include "engine/store/cadence.hpp"
#include "storage/claims.hpp"
#include "storage/database.hpp"
#include "storage/drain_store.hpp"
#include "storage/outcomes.hpp"
#include "storage/subscribers.hpp"
#include "storage/token_leases.hpp"

namespace surge::engine {

// A warning about a condition that may last: said when it starts, then every `every` while it
// lasts, so a log is not flooded by one warning per storage cycle.
class repeated_warning {
 public:
  explicit repeated_warning(std::chrono::steady_clock::duration every) : every_(every) {}
  bool due(std::chrono::steady_clock::time_point now) {
    if (active_ && now - last_ < every_) return false;
    active_ = true;
    last_ = now;
    return true;
  }
  void clear() { active_ = false; }

 private:
  std::chrono::steady_clock::duration every_;
  bool active_ = false;
  std::chrono::steady_clock::time_point last_{};
};

class storage_worker final : public storage_endpoint {
 public:
  storage_worker(const drain_config& config, drain_metrics& metrics);
  ~storage_worker() override;

  // Shards must be attached before start(); subscriber s belongs to shard s % shards.size().
  void attach(std::vector<shard_endpoint*> shards);
  void start();

  // Thread-safe hand-offs from shards (engine/handoff.hpp).
  void request_claims(int shard, std::vector<storage::subscriber_demand> demand) override;
  void submit(std::vector<storage::outcome> outcomes,
              std::vector<std::int64_t> deactivate) override;
  void submit_unspent(std::vector<storage::unspent_tokens> tokens) override;
  void submit_quotas(std::vector<storage::partner_quota_row> rows) override;

  // Stops claiming for good (shutdown or drained); pending claim requests are answered empty.
  void stop_claiming();
  // Writes what is left and ends the thread once every shard has submitted its unspent tokens.
  void finish(int shards_done_expected);
  // The stop's deadline passed: stop waiting for locks and for a database that refuses writes;
  // outcomes not yet written are left to their leases.
  void abandon();
  // The storage thread has ended (its last outcomes written or abandoned).
  bool finished() const { return finished_.load(); }
  void join();

  // Set when --until-drained finds nothing due, leased or in flight.
  void on_drained(std::function<void()> callback) { drained_callback_ = std::move(callback); }
  // Called on the storage thread when the queue file is no longer the one it opened.
  void on_fatal(std::function<void(std::string)> callback) {
    fatal_callback_ = std::move(callback);
  }
  // After join(): rows of the chosen subscribers still due or leased (-1 if unknown).
  std::int64_t remaining() const { return remaining_; }
  // After join(): rows whose outcome the database refused, even as a dead-letter, by id with
  // the reason: this drain claimed them no more (settle_refused).
  const std::map<std::int64_t, std::string>& quarantined() const { return quarantined_; }
  // After join(): outcomes abandoned at the stop's deadline; their rows wait for their leases.
  std::int64_t unwritten() const { return unwritten_; }
  // After join(): what was done about a queue file's write-ahead log deleted under the drain
  // (storage::drain_store::rescue_lost_log); empty if it was not.
  const std::string& rescue_report() const { return rescue_report_; }

 private:
  void run();
  void write_outcomes(bool force);
  void write_quotas(bool force);
  // Outcomes of `batch` whose rows another session holds go to `held`, for a later batch.
  void keep_held(const storage::write_report& report, std::span<const storage::outcome> batch,
                 std::vector<storage::outcome>& held);
  // One outcome the database refused for the row's sake: written as dead with the database's
  // reason, or, if that is refused too, left to the row's lease.
  void settle_refused(const storage::outcome& refused, const storage::error& why);
  // For a fault the drain cannot outlast (storage::is_fatal): stops claiming and ends the drain
  // with the cause and its fix; true if `failure` was one.
  bool stop_for_fault(const storage::error& failure);
  // Stops claiming and ends the drain with `why` (exit 1).
  void stop_with_failure(std::string why);
  // engine/store/commit_timing's outcomes_due for what this thread holds.
  bool outcomes_due_now(std::chrono::steady_clock::time_point now, bool force) const;
  // Metrics and the lost-lease warning for `rows` outcomes written in `took`.
  void note_written(const storage::write_report& report, std::size_t rows,
                    std::chrono::steady_clock::duration took);
  void answer_claims();
  // Trims `demand` to claim_rows_cap_ rows in all.
  void cap_claim(std::vector<storage::subscriber_demand>& demand) const;
  void note_held_subscribers(const std::vector<std::int64_t>& held);
  void reload_subscribers(bool initial);
  void check_drained();
  std::int64_t without_quarantined(std::int64_t outstanding) const;
  // `initial`: the first renewal, before any shard sent: buckets were just seeded.
  void renew_ownership(bool initial = false);
  void release_ownership();
  void ping_if_idle();
  void check_queue_file();
  void wake_for_new_rows();
  // Asks the shards of `ids` (every shard when `all`) to claim for them now.
  void wake_subscribers(const std::vector<std::int64_t>& ids, bool all);
  void tell_owner_change(const std::vector<std::int64_t>& ids, bool taken);
  // `ids` by the shard each belongs to (subscriber s to shard s % shards).
  std::vector<std::vector<std::int64_t>> split_by_shard(const std::vector<std::int64_t>& ids) const;
  void give_up_writing();
  void publish_wal_counters();
  void update_drainable();
  void sweep_stuck_rows();
  void sweep_malformed_rows();

  drain_config config_;
  drain_metrics& metrics_;
  drain_counters& counters_;
  std::vector<shard_endpoint*> shards_;
  std::thread thread_;
  std::function<void()> drained_callback_;
  std::function<void(std::string)> fatal_callback_;
  storage::interruptible_wait lock_wait_;
  std::atomic<bool> finished_{false};

  std::mutex mutex_;
  std::condition_variable wake_;
  struct inbox {
    std::vector<std::pair<int, std::vector<storage::subscriber_demand>>> claims;
    std::vector<storage::outcome> outcomes;
    std::vector<std::int64_t> deactivate;
    std::vector<storage::unspent_tokens> unspent;
    int unspent_batches = 0;
    std::vector<storage::partner_quota_row> quotas;
  } inbox_;
  bool claiming_ = true;
  int finish_expected_ = -1;

  // Owned by the storage thread only.
  std::vector<storage::outcome> pending_outcomes_;
  std::vector<std::int64_t> pending_deactivate_;
  std::vector<storage::unspent_tokens> pending_unspent_;
  std::vector<storage::partner_quota_row> pending_quotas_;
  std::chrono::steady_clock::time_point last_quota_write_{};
  int unspent_batches_ = 0;
  std::vector<std::pair<int, std::vector<storage::subscriber_demand>>> pending_claims_;
  std::chrono::steady_clock::time_point last_commit_{};
  storage_cadence cadence_;  // when reloads, renewals, new-row checks and counts fall due
  std::chrono::steady_clock::time_point last_ping_{};
  std::chrono::steady_clock::time_point retry_storage_after_{};
  // Rows of unknown subscribers and rows no claim can match: finding them reads every
  // outstanding row, so it is done seldom (see backlog_watch).
  static constexpr std::chrono::seconds stuck_row_sweep_interval{30};
  backlog_watch backlog_watch_{stuck_row_sweep_interval, std::chrono::steady_clock::now()};
  std::map<std::int64_t, std::string> quarantined_;  // see quarantined()
  std::int64_t rows_handed_out_ = 0;  // claimed rows sent to the shards, for backlog_watch_
  backlog_estimate backlog_estimate_;
  // Rows the shards have finished: delivered, dead or coalesced (for backlog_estimate_).
  std::int64_t finished_rows() const;
  proto::id_set drainable_;
  std::vector<std::pair<std::int64_t, bool>> sendable_;  // subscriber id, sends_now()
  std::int64_t remaining_ = -1;
  std::unordered_set<std::int64_t> bucket_repairs_said_;  // subscribers whose bucket was repaired
  std::int64_t unwritten_ = 0;
  std::string rescue_report_;
  bool queue_lost_ = false;  // stop_with_failure ran
  repeated_warning held_rows_warning_{std::chrono::seconds(30)};
  repeated_warning held_subscribers_warning_{std::chrono::seconds(30)};
  // While claims are cancelled by a statement timeout: the most rows one claim asks for.
  std::size_t claim_rows_cap_ = SIZE_MAX;
  bool ownership_released_ = false;
  std::unique_ptr<storage::drain_store> db_;
};

}  // namespace surge::engine
