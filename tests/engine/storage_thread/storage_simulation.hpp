#pragma once
// The storage core driven on a simulated clock, the way the storage thread drives it: the queue
// it claims from and writes to is kept in memory (rows due by time, leased when claimed, outcomes
// fenced on their lease, as tests/engine/shard/core_simulation.hpp keeps it for a shard), the
// database can be told to fail the next actions of a kind or to refuse a row's outcome, and every
// answer to a shard and every log line is kept for the test to read.
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/storage_thread/storage_core.hpp"
#include "tests/engine/recorded_log.hpp"

namespace surge::engine::testing {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

struct stored_row {
  std::int64_t id = 0;
  std::int64_t subscriber = 0;
  double due = 0;    // next_attempt_at
  double lease = 0;  // locked_until
  enum class state { pending, done, dead } now = state::pending;
  std::vector<storage::outcome_kind> written;  // every outcome applied to it, in order
};

// Which actions the database fails, and how.
enum class db_call { cycle, write, check, reload, renew, release, count, tokens, quotas };

class storage_simulation {
 public:
  explicit storage_simulation(storage_core_config config = default_config(), int shards = 1)
      : config_(std::move(config)),
        core_(config_, shards, counters, log),
        start_(steady::time_point{} + 1000s),
        now_(start_) {
    core_.begin(now_);
    drive();
  }

  static storage_core_config default_config() {
    storage_core_config config;
    config.storage.db_path = "queue.db";
    config.storage.new_rows_check_interval = 0ms;
    return config;
  }

  // The queue, in memory.
  void add_rows(std::int64_t subscriber, int count, double due_in = -1) {
    for (int i = 0; i < count; ++i) {
      const auto id = next_id_++;
      rows[id] = stored_row{.id = id, .subscriber = subscriber, .due = unix_now() + due_in};
    }
  }
  double unix_now() const {
    return 1'800'000'000.0 + std::chrono::duration<double>(now_ - start_).count();
  }
  steady::time_point now() const { return now_; }
  storage_core& core() { return core_; }

  // Faults: the next `times` calls of `call` fail with `kind`.
  void fail(db_call call, storage::error::kind kind, int times = 1) {
    for (int i = 0; i < times; ++i) faults_[call].push_back(kind);
  }
  // The database refuses an outcome of row `id` (as a done or retry; `even_dead`: as a dead too).
  void refuse(std::int64_t id, bool even_dead) { refused_[id] = even_dead; }

  // Events from the shards.
  void ask(int shard, std::int64_t subscriber, int rows_wanted) {
    core_.claims_asked(shard, {{.subscriber_id = subscriber, .rows = rows_wanted}});
  }
  // Outcomes for rows a shard was handed, all of one kind.
  void submit(const std::vector<storage::claimed_row>& sent,
              storage::outcome_kind kind = storage::outcome_kind::done) {
    std::vector<storage::outcome> outcomes;
    for (const auto& row : sent) {
      outcomes.push_back({.delivery_id = row.id, .lease = row.lease, .kind = kind});
    }
    // As a shard counts a delivery when it submits its outcome (engine/shard/shard_rows.cpp).
    if (kind == storage::outcome_kind::done) {
      counters.add(counters.delivered, static_cast<std::int64_t>(sent.size()));
    }
    core_.outcomes_submitted(std::move(outcomes), {});
  }

  // One round of the storage loop at the current time.
  void round() {
    core_.tick(now_);
    drive();
  }
  // Rounds every `step` for `total`, the way the storage loop wakes.
  void run_for(steady::duration total, steady::duration step = 5ms) {
    const auto end = now_ + total;
    while (now_ < end) {
      now_ += step;
      round();
    }
  }
  void advance(steady::duration by) { now_ += by; }

  // The rows handed to shard `shard` since the last call.
  std::vector<storage::claimed_row> take_rows(int shard = 0) {
    std::vector<storage::claimed_row> out;
    for (auto& answer : answers) {
      if (answer.shard != shard) continue;
      for (auto& row : answer.reply.rows) out.push_back(std::move(row));
      answer.reply.rows.clear();
    }
    return out;
  }
  int rows_in(stored_row::state state) const {
    int n = 0;
    for (const auto& [id, row] : rows) n += row.now == state ? 1 : 0;
    return n;
  }

  drain_counters counters;
  recorded_log log;
  std::map<std::int64_t, stored_row> rows;
  // What was asked of the database and what the shards were told.
  std::vector<std::vector<storage::subscriber_demand>> cycles;  // each claim's demand
  std::vector<std::size_t> writes;                              // each outcome write's size
  std::vector<storage_do::answer_shard> answers;
  std::vector<storage_do::tell_owner_change> owner_changes;
  std::vector<std::string> stops;
  int drained = 0;
  int renewals = 0;
  std::vector<std::chrono::duration<double>> sweeps;  // each sweep's lease horizon
  int releases = 0;
  int counts = 0;
  std::vector<storage::unspent_tokens> given_back;
  std::optional<storage_do::finish> finished;
  std::vector<std::pair<std::int64_t, bool>> subscribers{{1, true}, {2, true}};
  std::deque<storage::ownership_change> ownership;  // the next renewals' findings
  std::set<std::int64_t> locked;  // rows another session holds locked: their outcomes wait
  // Subscribers whose row another session holds locked: their tokens cannot be leased.
  std::set<std::int64_t> locked_subscribers;

 private:
  bool fails(db_call call) {
    auto& queued = faults_[call];
    if (queued.empty()) return false;
    const auto kind = queued.front();
    queued.pop_front();
    core_.failed(now_, storage::error("simulated failure", kind));
    return true;
  }

  // Applies outcomes as one transaction: a refused one rolls all back.
  std::optional<storage::write_report> apply(std::span<const storage::outcome> outcomes) {
    for (const auto& outcome : outcomes) {
      const auto refused = refused_.find(outcome.delivery_id);
      if (refused == refused_.end()) continue;
      if (outcome.kind != storage::outcome_kind::dead || refused->second) {
        core_.failed(now_,
                     storage::error("CHECK constraint failed", storage::error::kind::row_rejected));
        return std::nullopt;
      }
    }
    storage::write_report report;
    for (const auto& outcome : outcomes) {
      auto found = rows.find(outcome.delivery_id);
      if (found == rows.end() || found->second.lease != outcome.lease) {
        report.lost_leases.push_back(outcome.delivery_id);
        continue;
      }
      if (locked.contains(outcome.delivery_id)) {
        report.held_rows.push_back(outcome.delivery_id);
        continue;
      }
      auto& row = found->second;
      row.written.push_back(outcome.kind);
      row.lease = 0;
      if (outcome.kind == storage::outcome_kind::done) row.now = stored_row::state::done;
      if (outcome.kind == storage::outcome_kind::dead) row.now = stored_row::state::dead;
      ++report.applied;
    }
    return report;
  }

  void drive() {
    while (auto action = core_.next_action(now_)) perform(*action);
  }

  void perform(storage_action& action) {
    std::visit(
        [this](auto& act) {
          using kind = std::decay_t<decltype(act)>;
          if constexpr (std::is_same_v<kind, storage_do::run_cycle>) {
            cycles.emplace_back(act.demand.begin(), act.demand.end());
            if (fails(db_call::cycle)) return;
            std::optional<storage::write_report> written = storage::write_report{};
            if (!act.outcomes.empty()) written = apply(act.outcomes);
            if (!written) return;
            storage::cycle_result result;
            result.written = *written;
            const double lease = unix_now() + std::chrono::duration<double>(act.lease).count();
            for (const auto& demand : act.demand) {
              if (demand.tokens > 0 && locked_subscribers.contains(demand.subscriber_id)) {
                result.held_subscribers.push_back(demand.subscriber_id);
              }
              int left = demand.rows;
              for (auto& [id, row] : rows) {
                if (left <= 0) break;
                if (row.subscriber != demand.subscriber_id ||
                    row.now != stored_row::state::pending || row.due > unix_now() ||
                    row.lease > unix_now()) {
                  continue;
                }
                row.lease = lease;
                result.claimed.push_back(
                    {.id = id, .subscriber_id = row.subscriber, .lease = lease});
                --left;
              }
            }
            core_.cycle_done(now_, std::move(result));
          } else if constexpr (std::is_same_v<kind, storage_do::write_outcomes>) {
            writes.push_back(act.outcomes.size());
            if (fails(db_call::write)) return;
            if (auto report = apply(act.outcomes)) core_.outcomes_written(now_, *report);
          } else if constexpr (std::is_same_v<kind, storage_do::write_quotas>) {
            if (!fails(db_call::quotas)) core_.done(now_);
          } else if constexpr (std::is_same_v<kind, storage_do::check_database>) {
            if (!fails(db_call::check)) core_.done(now_);
          } else if constexpr (std::is_same_v<kind, storage_do::reload_subscribers>) {
            if (!fails(db_call::reload)) core_.subscribers_loaded(now_, subscribers);
          } else if constexpr (std::is_same_v<kind, storage_do::renew_ownership>) {
            ++renewals;
            if (fails(db_call::renew)) return;
            storage::ownership_change change;
            if (!ownership.empty()) {
              change = std::move(ownership.front());
              ownership.pop_front();
            }
            core_.ownership_renewed(now_, change, 2);
          } else if constexpr (std::is_same_v<kind, storage_do::release_ownership>) {
            ++releases;
            if (!fails(db_call::release)) core_.done(now_);
          } else if constexpr (std::is_same_v<kind, storage_do::count_backlog>) {
            ++counts;
            if (fails(db_call::count)) return;
            std::int64_t outstanding = 0;
            std::optional<double> earliest;
            for (const auto& [id, row] : rows) {
              if (row.now != stored_row::state::pending) continue;
              if (row.due <= unix_now() || row.lease > unix_now()) {
                ++outstanding;
              } else if (!earliest || row.due < *earliest) {
                earliest = row.due;
              }
            }
            std::optional<double> earliest_in;
            if (earliest) earliest_in = *earliest - unix_now();
            core_.backlog_counted(now_, outstanding, earliest_in, 1ms);
          } else if constexpr (std::is_same_v<kind, storage_do::sweep_stuck_rows>) {
            sweeps.push_back(act.lease_horizon);
            core_.swept(now_, 0, {});
          } else if constexpr (std::is_same_v<kind, storage_do::count_remaining>) {
            std::int64_t left = 0;
            for (const auto& [id, row] : rows)
              left += row.now == stored_row::state::pending ? 1 : 0;
            core_.remaining_counted(left);
          } else if constexpr (std::is_same_v<kind, storage_do::give_back_tokens>) {
            if (fails(db_call::tokens)) return;
            given_back.insert(given_back.end(), act.tokens.begin(), act.tokens.end());
            core_.done(now_);
          } else if constexpr (std::is_same_v<kind, storage_do::answer_shard>) {
            answers.push_back(std::move(act));
          } else if constexpr (std::is_same_v<kind, storage_do::tell_owner_change>) {
            owner_changes.push_back(std::move(act));
          } else if constexpr (std::is_same_v<kind, storage_do::stop_drain>) {
            stops.push_back(act.why);
          } else if constexpr (std::is_same_v<kind, storage_do::drained>) {
            ++drained;
          } else if constexpr (std::is_same_v<kind, storage_do::finish>) {
            finished = act;
          }
        },
        action);
  }

  storage_core_config config_;
  storage_core core_;
  steady::time_point start_;
  steady::time_point now_;
  std::int64_t next_id_ = 1;
  std::map<db_call, std::deque<storage::error::kind>> faults_;
  std::map<std::int64_t, bool> refused_;  // row id, refused even as dead
};

}  // namespace surge::engine::testing
