#pragma once
// The storage thread: the one connection of a drain that claims and writes
// (storage/drain_store.hpp, a SQLite file or PostgreSQL). Shards hand it claim requests and outcome
// batches (engine/handoff.hpp); what to do with them, and when, is storage_core's
// (engine/storage_thread/storage_core.hpp). This thread takes the shards' hand-offs in, feeds them
// to the core as events with the clock's now, and has storage_executor perform the actions the
// core answers with.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <memory>
#include <vector>

#include "engine/config.hpp"
#include "engine/handoff.hpp"
#include "engine/observe/counters.hpp"
#include "engine/observe/log.hpp"
#include "engine/observe/metrics.hpp"
#include "engine/storage_thread/storage_core.hpp"
#include "engine/storage_thread/storage_executor.hpp"
#include "engine/storage_thread/sweep_judgement.hpp"
#include "storage/claims.hpp"
#include "storage/database.hpp"
#include "storage/drain_store.hpp"
#include "storage/outcomes.hpp"
#include "storage/subscribers.hpp"
#include "storage/token_leases.hpp"

namespace surge::engine {

class storage_worker final : public storage_endpoint {
 public:
  storage_worker(const drain_config& config, drain_metrics& metrics);
  ~storage_worker() override;

  // Shards must be attached before start(); each subscriber belongs to one of them (shard_of,
  // engine/handoff.hpp).
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

  // What the backlog sweep has judged: coalescing subscribers are claimed up to it.
  sweep_judgement& judgement() { return judgement_; }

  // Set when --until-drained finds nothing due, leased or in flight.
  void on_drained(std::function<void()> callback) { drained_callback_ = std::move(callback); }
  // Called on the storage thread when the queue file is no longer the one it opened.
  void on_fatal(std::function<void(std::string)> callback) {
    fatal_callback_ = std::move(callback);
  }
  // After join(): rows of the chosen subscribers still due or leased (-1 if unknown).
  std::int64_t remaining() const { return ended() ? ended()->remaining : -1; }
  // After join(): rows whose outcome the database refused, even as a dead-letter, by id with
  // the reason: this drain claimed them no more (settle_refused).
  const std::map<std::int64_t, std::string>& quarantined() const {
    static const std::map<std::int64_t, std::string> none;
    return core_ ? core_->quarantined() : none;
  }
  // After join(): outcomes abandoned at the stop's deadline; their rows wait for their leases.
  std::int64_t unwritten() const { return ended() ? ended()->unwritten : 0; }
  // After join(): what was done about a queue file's write-ahead log deleted under the drain
  // (storage::drain_store::rescue_lost_log); empty if it was not.
  const std::string& rescue_report() const {
    static const std::string none;
    return executor_ ? executor_->rescue_report() : none;
  }

 private:
  void run();
  const std::optional<storage_do::finish>& ended() const {
    static const std::optional<storage_do::finish> none;
    return executor_ ? executor_->ended() : none;
  }

  drain_config config_;
  drain_metrics& metrics_;
  std::vector<shard_endpoint*> shards_;
  std::thread thread_;
  std::function<void()> drained_callback_;
  std::function<void(std::string)> fatal_callback_;
  storage::interruptible_wait lock_wait_;
  sweep_judgement judgement_;
  std::atomic<bool> finished_{false};

  std::mutex mutex_;
  std::condition_variable wake_;
  struct inbox {
    std::vector<std::pair<int, std::vector<storage::subscriber_demand>>> claims;
    std::vector<storage::outcome> outcomes;
    std::vector<std::int64_t> deactivate;
    std::vector<std::vector<storage::unspent_tokens>> unspent;
    std::vector<storage::partner_quota_row> quotas;
    bool stop_claiming = false;
    int finish_expected = -1;
    bool abandoned = false;
    bool news = false;  // a stop, finish or abandon not yet handed to the core
  } inbox_;

  // Owned by the storage thread only.
  stderr_log log_;  // where the core's lines go
  std::unique_ptr<storage::drain_store> db_;
  std::unique_ptr<storage_core> core_;
  std::unique_ptr<storage_executor> executor_;
};

}  // namespace surge::engine
