#pragma once
// The storage thread's rules without its I/O: which claims to answer and when, when outcomes are
// committed, what a failure costs (backoff, a smaller claim after a statement timeout, a refused
// row set apart), when the periodic reads fall due, and how the drain ends. Events come in with
// `now`; actions come out of next_action() for storage_executor to perform against the queue,
// and it hands each action's result or storage::error back. Logs leave through the sink handed
// in; counters are relaxed atomics. No clock is read here, so the tests drive it and its
// executor on a simulated one (tests/engine/storage_thread/storage_core_test.cpp). The core keeps
// the loop's rounds and what waits for what; each concern with state of its own is a small
// machine it calls: claim_round (with claim_size), pending_outcomes (with outcome_batches),
// refused_rows, announced_quotas, periodic_reads (with storage_cadence and backlog_check),
// ownership_round, drain_end (and the pure until_drained rules); storage_reporter counts and says
// what the database did.
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/config.hpp"
#include "engine/handoff.hpp"
#include "engine/observe/counters.hpp"
#include "engine/observe/log.hpp"
#include "engine/storage_thread/announced_quotas.hpp"
#include "engine/storage_thread/claim_round.hpp"
#include "engine/storage_thread/drain_end.hpp"
#include "engine/storage_thread/outcome_batches.hpp"
#include "engine/storage_thread/ownership_round.hpp"
#include "engine/storage_thread/pending_outcomes.hpp"
#include "engine/storage_thread/periodic_reads.hpp"
#include "engine/storage_thread/refused_rows.hpp"
#include "engine/storage_thread/storage_actions.hpp"
#include "engine/storage_thread/storage_core_config.hpp"
#include "engine/storage_thread/storage_reporter.hpp"
#include "storage/cycle.hpp"
#include "storage/error.hpp"
#include "storage/maintenance.hpp"
#include "storage/outcomes.hpp"
#include "storage/ownership.hpp"

namespace surge::engine {

class storage_core {
 public:
  using clock = std::chrono::steady_clock;

  storage_core(const storage_core_config& config, int shards, drain_counters& counters,
               core_log& log);

  // Start-up: the first reload and ownership renewal are the first actions; the loop's own
  // cadence starts at `now`.
  void begin(clock::time_point now);

  // Events from the shards (engine/handoff.hpp).
  void claims_asked(int shard, std::vector<storage::subscriber_demand> demand);
  // Outcomes a shard counted in drain_counters::outcomes_in_transit when it settled them.
  void outcomes_submitted(std::vector<storage::outcome> outcomes,
                          std::vector<std::int64_t> deactivate);
  void tokens_returned(std::vector<storage::unspent_tokens> tokens);  // one call per shard
  void quotas_announced(std::vector<storage::partner_quota_row> rows);
  // Events from the drain.
  void stop_claiming() { claiming_ = false; }
  void finish(int shards_expected) { end_.finish(shards_expected); }
  // The stop's deadline passed: outcomes not yet written are left to their leases.
  void abandon() { end_.abandon(); }

  // A new round of the loop at `now`: the next actions are what falls due.
  void tick(clock::time_point now);
  // The next thing to do, or nullopt until next_wake() (or an event).
  std::optional<storage_action> next_action(clock::time_point now);
  // When the loop runs its next round with no event: wake_interval after the last round ended
  // (new rows, commits and the periodic reads are looked for that often), or the error backoff
  // while the end waits for a database that refuses writes.
  clock::time_point next_wake() const { return next_wake_; }
  bool finished() const { return end_.ended(); }

  // Results of the last action.
  void done(clock::time_point now);
  void failed(clock::time_point now, const storage::error& error);
  void cycle_done(clock::time_point now, storage::cycle_result result);
  void outcomes_written(clock::time_point now, const storage::write_report& report);
  // `sendable`: subscriber id and sends_now() for each row loaded.
  void subscribers_loaded(clock::time_point now,
                          std::vector<std::pair<std::int64_t, bool>> sendable);
  void ownership_renewed(clock::time_point now, const storage::ownership_change& change,
                         std::int64_t owned);
  // `outstanding`: due or leased rows of the subscribers waited for; `earliest_in`: seconds from
  // now until the earliest scheduled row falls due (negative: overdue; nullopt: none); `took`:
  // how long the count ran.
  void backlog_counted(clock::time_point now, std::int64_t outstanding,
                       std::optional<double> earliest_in, clock::duration took);
  void swept(clock::time_point now, std::int64_t orphans, const storage::malformed_rows& found);
  void remaining_counted(std::int64_t remaining);
  // The queue file is no longer the one opened (storage::drain_store::missing_file).
  void queue_lost(std::string why);

  // What the storage thread exposes (storage_worker's accessors).
  const std::vector<std::pair<std::int64_t, bool>>& sendable() const { return sendable_; }
  const std::map<std::int64_t, std::string>& quarantined() const { return refused_.quarantined(); }
  std::size_t outcomes_waiting() const { return pending_.size(); }
  // Whether `arrived` outcomes, just handed in, make a commit due at once. Only new ones wake the
  // loop: outcomes the core keeps waiting (through a backoff, or behind another session's lock)
  // would otherwise wake it again and again, a busy loop, until next_wake().
  bool commit_due_with(std::size_t arrived) const { return pending_.due_with(arrived); }
  // While claims are cancelled by a statement timeout: the most rows one claim asks for.
  std::size_t claim_rows_cap() const { return claim_.most_rows(); }
  bool claiming() const { return claiming_; }
  // Whether claims and writes wait for the error backoff at `now`.
  bool backing_off(clock::time_point now) const { return now < retry_storage_after_; }

 private:
  // The phases of one round, in the storage loop's order.
  enum class phase {
    new_rows,
    claims,
    outcomes,
    quotas,
    check,
    periodic,
    stopped,
    finishing,
    idle
  };
  enum class awaiting {
    nothing,
    cycle,
    outcomes,
    quotas,
    check,
    reload,
    renew,
    release,
    count,
    sweep,
    remaining,
    tokens
  };

  std::optional<storage_action> step(clock::time_point now);
  std::optional<storage_action> claims_step(clock::time_point now);
  // The sweep, with the lease horizon beyond which a held row is stuck.
  storage_do::sweep_stuck_rows sweep() const;
  // The round's periodic reads (periodic_reads), each performed as the core's action.
  std::optional<storage_action> periodic_step(clock::time_point now);
  std::optional<storage_action> finish_step(clock::time_point now);
  // Starts a run of outcome batches if outcomes are due (or `force`); true if one started.
  bool start_outcomes(clock::time_point now, bool force);
  // A write of outcomes failed: a refused row is looked for, anything else waits out a backoff.
  void outcomes_failed(clock::time_point now, const storage::error& error);
  void outcome_run_failed(clock::time_point now, const storage::error& error);
  void quarantine(std::int64_t delivery_id, const std::string& reason);
  storage_do::run_cycle cycle_action(clock::time_point now);
  void cycle_failed(clock::time_point now, const storage::error& error);
  void answer_claims(std::vector<storage::claimed_row> rows,
                     std::vector<storage::token_grant> granted, std::vector<std::int64_t> more_due);
  // For a fault the drain cannot outlast (storage::is_fatal): stops claiming and ends the drain
  // with the cause and its fix; true if `failure` was one.
  bool stop_for_fault(const storage::error& failure);
  void stop_with_failure(std::string why);
  void storage_failure(log_level level, const std::string& what, const storage::error& error);
  std::int64_t finished_rows() const;
  bool shards_idle() const;
  void say(log_level level, std::string message) { report_.say(level, std::move(message)); }

  storage_core_config config_;
  claim_round claim_;  // the shards' asks, the claim under way, and its answers
  drain_counters& counters_;
  storage_reporter report_;  // what it counts and says about what the database did

  // Events not yet taken in.
  pending_outcomes pending_;  // outcomes and deactivations not yet written, and their runs
  bool claiming_ = true;

  // The round in progress and the action whose result is awaited.
  phase phase_ = phase::idle;
  awaiting awaiting_ = awaiting::nothing;
  std::deque<storage_action> outbox_;  // answers and notices: performed, not answered
  std::deque<std::pair<storage_action, awaiting>> queued_;  // follow-ups whose result is awaited

  clock::time_point next_wake_{};
  clock::time_point retry_storage_after_{};
  announced_quotas quotas_;  // the partners' announced quotas, on their way to the database
  periodic_reads reads_;     // the database check, reloads, renewals and backlog checks
  refused_rows refused_;     // rows dead-lettered or quarantined after a refused outcome
  std::vector<std::pair<std::int64_t, bool>> sendable_;  // subscriber id, sends_now()
  bool queue_lost_ = false;                              // stop_with_failure ran
  ownership_round ownership_;  // renewals' answers for the shards, and the release
  drain_end end_;              // the end's sequence, once the shards are done
};

}  // namespace surge::engine
