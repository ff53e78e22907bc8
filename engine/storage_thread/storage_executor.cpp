#include "engine/storage_thread/storage_executor.hpp"

#include <algorithm>
#include <type_traits>
#include <utility>

#include "engine/subscriber_settings.hpp"
#include "proto/clock.hpp"

namespace surge::engine {

storage_clocks storage_clocks::real() {
  return {.steady = [] { return std::chrono::steady_clock::now(); },
          .wall = [] { return proto::unix_now(); }};
}

storage_executor::storage_executor(storage_executor_config config, storage_core& core,
                                   storage::drain_store& db, std::vector<shard_endpoint*> shards,
                                   drain_metrics& metrics, core_log& log, storage_clocks clocks)
    : config_(std::move(config)),
      core_(core),
      db_(db),
      shards_(std::move(shards)),
      metrics_(metrics),
      log_(log),
      clocks_(std::move(clocks)) {}

void storage_executor::perform_due() {
  while (auto action = core_.next_action(clocks_.steady())) perform(*action);
}

void storage_executor::perform(storage_action& action) {
  std::visit(
      [this](auto& act) {
        try {
          execute(act);
        } catch (const storage::error& error) {
          if constexpr (std::is_same_v<std::decay_t<decltype(act)>,
                                       storage_do::reload_subscribers>) {
            if (act.initial) throw;
          }
          core_.failed(clocks_.steady(), error);
        }
      },
      action);
}

void storage_executor::execute(const storage_do::check_new_rows&) {
  try {
    auto found = db_.check_new_rows(clocks_.wall());
    if (!found.any()) return;
    metrics_.counters.add(metrics_.counters.new_row_wakes);
    auto per_shard = split_by_shard(found.subscribers);
    for (std::size_t i = 0; i < shards_.size(); ++i) {
      if (found.all || !per_shard[i].empty()) {
        shards_[i]->on_new_rows(std::move(per_shard[i]), found.all);
      }
    }
  } catch (const storage::error& error) {
    // The idle poll still finds the rows; a failing database shows in the claims too.
    log_.write(log_level::debug, std::string("looking for new rows failed: ") + error.what());
  }
}

void storage_executor::execute(const storage_do::run_cycle& act) {
  const auto started = clocks_.steady();
  auto result =
      db_.write_and_claim(act.outcomes, act.deactivate, act.demand, clocks_.wall(),
                          std::chrono::duration<double>(act.lease).count(), act.max_payload_bytes);
  const auto took = clocks_.steady() - started;
  if (!act.outcomes.empty() || !act.deactivate.empty()) note_written(act.outcomes.size(), took);
  metrics_.claim_duration.observe(std::chrono::duration<double>(took).count());
  metrics_.claim_rows.observe(static_cast<double>(result.claimed.size()));
  metrics_.beat_storage();
  core_.cycle_done(clocks_.steady(), std::move(result));
}

void storage_executor::execute(const storage_do::write_outcomes& act) {
  const auto started = clocks_.steady();
  const auto report = db_.write_outcomes(act.outcomes, act.deactivate);
  note_written(act.outcomes.size(), clocks_.steady() - started);
  core_.outcomes_written(clocks_.steady(), report);
}

void storage_executor::execute(const storage_do::write_quotas& act) {
  db_.record_partner_quotas(act.rows);
  core_.done(clocks_.steady());
}

void storage_executor::execute(const storage_do::check_database& act) {
  if (act.look_for_file) {
    if (auto lost = db_.missing_file(); !lost.empty()) core_.queue_lost(lost);
  }
  db_.ping();
  metrics_.beat_storage();
  core_.done(clocks_.steady());
}

void storage_executor::execute(const storage_do::reload_subscribers&) {
  auto rows = db_.load_subscribers(config_.subscribers);
  std::vector<std::pair<std::int64_t, bool>> sendable;
  sendable.reserve(rows.size());
  for (const auto& row : rows) sendable.emplace_back(row.id, sends_now(row));
  std::vector<std::vector<storage::subscriber_row>> per_shard(shards_.size());
  for (auto& row : rows) {
    per_shard[shard_of(row.id, shards_.size())].push_back(std::move(row));
  }
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    shards_[i]->on_subscribers(std::move(per_shard[i]));
  }
  core_.subscribers_loaded(clocks_.steady(), std::move(sendable));
}

void storage_executor::execute(const storage_do::renew_ownership&) {
  const auto change = db_.renew_ownership(clocks_.wall());
  const auto owned = static_cast<std::int64_t>(db_.owned_count(clocks_.wall()));
  core_.ownership_renewed(clocks_.steady(), change, owned);
}

void storage_executor::execute(const storage_do::release_ownership&) {
  db_.release_ownership();
  core_.done(clocks_.steady());
}

void storage_executor::execute(const storage_do::count_backlog&) {
  const double now = clocks_.wall();
  // The rows of the chosen subscribers that --until-drained waits for.
  const auto which = drainable_subscribers(config_.subscribers, config_.until_drained, now,
                                           core_.sendable(), metrics_.held_subscribers());
  const auto began = clocks_.steady();
  const auto outstanding = db_.count_outstanding(now, which);
  const auto earliest = db_.earliest_scheduled(now, which);
  // Both reads are the check's cost, which spaces the next one (backlog_check_interval).
  const auto took = clocks_.steady() - began;
  metrics_.oldest_due_age.store(earliest ? std::max(0.0, now - *earliest) : 0.0,
                                std::memory_order_relaxed);
  metrics_.beat_storage();
  std::optional<double> earliest_in;
  if (earliest) earliest_in = *earliest - now;
  core_.backlog_counted(clocks_.steady(), outstanding, earliest_in, took);
}

void storage_executor::execute(const storage_do::sweep_stuck_rows& act) {
  const double now = clocks_.wall();
  const auto orphans = db_.dead_letter_orphans(now, config_.subscribers);
  const auto found =
      db_.dead_letter_malformed(now, now + act.lease_horizon.count(), config_.subscribers);
  core_.swept(clocks_.steady(), orphans, found);
}

void storage_executor::execute(const storage_do::count_remaining&) {
  core_.remaining_counted(db_.count_outstanding(clocks_.wall(), config_.subscribers));
}

void storage_executor::execute(const storage_do::give_back_tokens& act) {
  db_.give_back_tokens(act.tokens, clocks_.wall());
  core_.done(clocks_.steady());
}

void storage_executor::execute(storage_do::answer_shard& act) {
  shards_[static_cast<std::size_t>(act.shard)]->on_claimed(std::move(act.reply));
}

void storage_executor::execute(const storage_do::tell_owner_change& act) {
  auto per_shard = split_by_shard(act.subscribers);
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    if (per_shard[i].empty()) continue;
    if (act.taken) {
      shards_[i]->on_taken(std::move(per_shard[i]));
    } else {
      shards_[i]->on_disowned(std::move(per_shard[i]));
    }
  }
}

void storage_executor::execute(storage_do::stop_drain& act) {
  if (on_fatal) on_fatal(std::move(act.why));
}

void storage_executor::execute(const storage_do::drained&) {
  if (on_drained) on_drained();
}

void storage_executor::execute(const storage_do::finish& end) {
  ended_ = end;
  if (end.unwritten > 0) {
    const auto wait = std::max(0.0, end.last_lease - clocks_.wall());
    log_.write(log_level::error, "stopped before the database took the outcomes of " +
                                     std::to_string(end.unwritten) +
                                     " rows; their leases end within " +
                                     std::to_string(static_cast<long long>(wait + 1)) +
                                     " s and they will be sent again then (at-least-once)");
  }
  publish_wal_counters();
  rescue_report_ = db_.rescue_lost_log();
}

std::vector<std::vector<std::int64_t>> storage_executor::split_by_shard(
    const std::vector<std::int64_t>& ids) const {
  std::vector<std::vector<std::int64_t>> per_shard(shards_.size());
  if (shards_.empty()) return per_shard;
  for (const auto id : ids) per_shard[shard_of(id, shards_.size())].push_back(id);
  return per_shard;
}

void storage_executor::note_written(std::size_t rows, clock::duration took) {
  metrics_.commit_duration.observe(std::chrono::duration<double>(took).count());
  metrics_.commit_rows.observe(static_cast<double>(rows));
  metrics_.beat_storage();
}

void storage_executor::publish_wal_counters() {
  const auto written = db_.counters();
  metrics_.counters.wal_commits.store(written.commits, std::memory_order_relaxed);
  metrics_.counters.wal_frames.store(written.frames, std::memory_order_relaxed);
}

}  // namespace surge::engine
