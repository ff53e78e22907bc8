#pragma once
// Performs the storage core's actions (engine/storage_thread/storage_core.hpp): each one against
// the queue (storage::drain_store) or the shards (engine/handoff.hpp), with its result or
// storage::error handed back to the core. When to do what is the core's; the executor carries
// only what an answer cannot wait for the core to say: a failed first reload fails the start,
// new rows it cannot look for are left to the shards' idle polls, and the backlog count covers
// the subscribers --until-drained waits for. The storage thread (storage_worker) runs it on the
// real clocks; the core's tests run it on a simulated clock against a queue kept in memory
// (tests/engine/storage_thread/memory_drain_store.hpp).
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/handoff.hpp"
#include "engine/observe/log.hpp"
#include "engine/observe/metrics.hpp"
#include "engine/storage_thread/storage_actions.hpp"
#include "engine/storage_thread/storage_core.hpp"
#include "engine/storage_thread/until_drained.hpp"
#include "proto/id_set.hpp"
#include "storage/drain_store.hpp"

namespace surge::engine {

// The two clocks the executor reads: the core's (steady) and the queue's (wall: unix seconds).
struct storage_clocks {
  std::function<std::chrono::steady_clock::time_point()> steady;
  std::function<double()> wall;

  static storage_clocks real();
};

struct storage_executor_config {
  proto::id_set subscribers;  // --subscribers: what reloads, sweeps and counts cover
  until_drained_wait until_drained;
};

class storage_executor {
 public:
  using clock = std::chrono::steady_clock;

  // `shards` by index (engine/handoff.hpp: shard_of); every reference must outlive the executor.
  storage_executor(storage_executor_config config, storage_core& core, storage::drain_store& db,
                   std::vector<shard_endpoint*> shards, drain_metrics& metrics, core_log& log,
                   storage_clocks clocks);

  // Performs the core's actions until it has none at the clock's now.
  void perform_due();
  // Performs one action. A storage::error goes back to the core, except a failed first reload
  // of subscribers, which is thrown: a queue that cannot be read fails the start.
  void perform(storage_action& action);
  // The store's write counters, into the drain's counters.
  void publish_wal_counters();

  // Called each time the core says --until-drained has nothing more to send.
  std::function<void()> on_drained;
  // Called with the cause of a fault the drain cannot outlast.
  std::function<void(std::string)> on_fatal;

  // Once the core has finished: what it left behind, and what was done about a lost WAL.
  const std::optional<storage_do::finish>& ended() const { return ended_; }
  const std::string& rescue_report() const { return rescue_report_; }

 private:
  // One per action kind: the queue's or the shards' call, and the core's event with its result.
  void execute(const storage_do::check_new_rows&);
  void execute(const storage_do::run_cycle& act);
  void execute(const storage_do::write_outcomes& act);
  void execute(const storage_do::write_quotas& act);
  void execute(const storage_do::check_database& act);
  void execute(const storage_do::reload_subscribers&);
  void execute(const storage_do::renew_ownership&);
  void execute(const storage_do::release_ownership&);
  void execute(const storage_do::count_backlog&);
  void execute(const storage_do::sweep_stuck_rows& act);
  void execute(const storage_do::count_remaining&);
  void execute(const storage_do::give_back_tokens& act);
  void execute(storage_do::answer_shard& act);
  void execute(const storage_do::tell_owner_change& act);
  void execute(storage_do::stop_drain& act);
  void execute(const storage_do::drained&);
  void execute(const storage_do::finish& end);
  // `ids` by the shard each belongs to (engine/handoff.hpp: shard_of).
  std::vector<std::vector<std::int64_t>> split_by_shard(const std::vector<std::int64_t>& ids) const;
  void note_written(std::size_t rows, clock::duration took);

  storage_executor_config config_;
  storage_core& core_;
  storage::drain_store& db_;
  std::vector<shard_endpoint*> shards_;
  drain_metrics& metrics_;
  core_log& log_;
  storage_clocks clocks_;
  std::optional<storage_do::finish> ended_;
  std::string rescue_report_;
};

}  // namespace surge::engine
