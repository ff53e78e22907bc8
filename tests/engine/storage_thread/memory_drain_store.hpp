#pragma once
// A storage::drain_store kept in memory, for the storage core's tests: the queue the shard
// core's simulation keeps too (tests/engine/simulated_queue.hpp), with a cycle's outcomes applied
// as one transaction (a refused one rolls all back) and a lost lease reported, not applied. The
// test tells it to fail the next calls of a kind or to refuse a row's outcome, and reads what
// was asked of it.
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "storage/drain_store.hpp"
#include "storage/error.hpp"
#include "tests/engine/simulated_queue.hpp"

namespace surge::engine::testing {

// Which calls the database fails.
enum class db_call { cycle, write, check, reload, renew, release, count, tokens, quotas };

class memory_drain_store final : public storage::drain_store {
 public:
  // Faults: the next `times` calls of `call` throw storage::error of `kind`.
  void fail(db_call call, storage::error::kind kind, int times = 1) {
    for (int i = 0; i < times; ++i) faults_[call].push_back(kind);
  }
  // Refuses an outcome of row `id` (as a done or retry; `even_dead`: as a dead too).
  void refuse(std::int64_t id, bool even_dead) { refused_[id] = even_dead; }

  simulated_queue queue;
  std::vector<std::pair<std::int64_t, bool>> subscribers{{1, true}, {2, true}};  // id, active
  std::deque<storage::ownership_change> ownership;  // the next renewals' findings
  std::set<std::int64_t> locked;  // rows another session holds locked: their outcomes wait
  // Subscribers whose row another session holds locked: their tokens cannot be leased.
  std::set<std::int64_t> locked_subscribers;
  // Called as a count of outstanding rows starts: the simulation moves its clock on by what the
  // count takes.
  std::function<void()> while_counting;
  // What is gone of the queue's files (drain_store::missing_file); empty: nothing.
  std::string missing;

  // What was asked of it.
  std::vector<std::vector<storage::subscriber_demand>> cycles;  // each claim's demand
  std::vector<std::size_t> writes;                              // each outcome write's size
  int renewals = 0;
  int releases = 0;
  int backlog_counts = 0;      // earliest_scheduled, which only the backlog check reads
  std::vector<double> sweeps;  // each sweep's lease horizon, in seconds from its now
  std::vector<storage::unspent_tokens> given_back;

  const std::string& owner() const override { return owner_; }

  storage::cycle_result write_and_claim(std::span<const storage::outcome> outcomes,
                                        std::span<const std::int64_t>,
                                        std::span<const storage::subscriber_demand> demand,
                                        double now, double lease_seconds, std::int64_t) override {
    cycles.emplace_back(demand.begin(), demand.end());
    throw_if_failing(db_call::cycle);
    storage::cycle_result result;
    result.written = apply(outcomes);
    const double lease = now + lease_seconds;
    for (const auto& asked : demand) {
      if (asked.tokens > 0 && locked_subscribers.contains(asked.subscriber_id)) {
        result.held_subscribers.push_back(asked.subscriber_id);
      }
      // As the stores claim a subscriber whose rows are not ordered: no word of more due.
      if (asked.rows <= 0) continue;
      auto taken = queue.take(asked.subscriber_id, asked.rows, now, lease);
      result.claimed.insert(result.claimed.end(), taken.rows.begin(), taken.rows.end());
    }
    return result;
  }

  storage::write_report write_outcomes(std::span<const storage::outcome> outcomes,
                                       std::span<const std::int64_t>) override {
    writes.push_back(outcomes.size());
    throw_if_failing(db_call::write);
    return apply(outcomes);
  }

  void give_back_tokens(std::span<const storage::unspent_tokens> tokens, double) override {
    throw_if_failing(db_call::tokens);
    given_back.insert(given_back.end(), tokens.begin(), tokens.end());
  }
  void record_partner_quotas(std::span<const storage::partner_quota_row>) override {
    throw_if_failing(db_call::quotas);
  }

  std::vector<storage::subscriber_row> load_subscribers(const proto::id_set& which) override {
    throw_if_failing(db_call::reload);
    std::vector<storage::subscriber_row> loaded;
    for (const auto& [id, active] : subscribers) {
      if (which.contains(id)) loaded.push_back({.id = id, .active = active});
    }
    return loaded;
  }
  std::int64_t dead_letter_orphans(double, const proto::id_set&) override { return 0; }
  storage::malformed_rows dead_letter_malformed(double now, double lease_horizon,
                                                const proto::id_set&) override {
    sweeps.push_back(lease_horizon - now);
    return {};
  }
  std::int64_t count_outstanding(double now, const proto::id_set& which) override {
    throw_if_failing(db_call::count);
    if (while_counting) while_counting();
    return queue.count_outstanding(now, which);
  }
  std::optional<double> earliest_scheduled(double now, const proto::id_set& which) override {
    ++backlog_counts;
    return queue.earliest_scheduled(now, which);
  }

  void ping() override { throw_if_failing(db_call::check); }
  std::string missing_file() override {
    log_lost_ = log_lost_ || !missing.empty();
    return missing;
  }
  // As the SQLite store: only a log that missing_file() found gone is rescued.
  std::string rescue_lost_log() override {
    return log_lost_ ? "copied 7 pages of the lost log into the queue file" : "";
  }
  storage::new_rows check_new_rows(double) override { return {}; }

  storage::ownership_change renew_ownership(double) override {
    ++renewals;
    throw_if_failing(db_call::renew);
    if (ownership.empty()) return {};
    auto change = std::move(ownership.front());
    ownership.pop_front();
    return change;
  }
  std::size_t owned_count(double) const override { return subscribers.size(); }
  void release_ownership() override {
    ++releases;
    throw_if_failing(db_call::release);
  }

  storage::write_counters counters() const override { return {}; }

 private:
  void throw_if_failing(db_call call) {
    auto& queued = faults_[call];
    if (queued.empty()) return;
    const auto kind = queued.front();
    queued.pop_front();
    throw storage::error("simulated failure", kind);
  }

  // One transaction: a refused outcome rolls all back.
  storage::write_report apply(std::span<const storage::outcome> outcomes) {
    for (const auto& outcome : outcomes) {
      const auto refused = refused_.find(outcome.delivery_id);
      if (refused == refused_.end()) continue;
      if (outcome.kind != storage::outcome_kind::dead || refused->second) {
        throw storage::error("CHECK constraint failed", storage::error::kind::row_rejected);
      }
    }
    storage::write_report report;
    for (const auto& outcome : outcomes) {
      if (!queue.holds_lease(outcome)) {
        report.lost_leases.push_back(outcome.delivery_id);
        continue;
      }
      if (locked.contains(outcome.delivery_id)) {
        report.held_rows.push_back(outcome.delivery_id);
        continue;
      }
      queue.apply(outcome);
      ++report.applied;
    }
    return report;
  }

  std::string owner_ = "surge@test:1";
  bool log_lost_ = false;
  std::map<db_call, std::deque<storage::error::kind>> faults_;
  std::map<std::int64_t, bool> refused_;  // row id, refused even as dead
};

}  // namespace surge::engine::testing
