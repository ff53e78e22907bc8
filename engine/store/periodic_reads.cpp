// The storage thread's periodic reads: subscriber settings, rows no claim could match, the
// backlog behind --until-drained, and whether the queue file is still there.
#include <algorithm>
#include <cstdint>

#include "engine/observe/log.hpp"
#include "engine/store/storage_worker.hpp"
#include "engine/subscriber_settings.hpp"
#include "proto/clock.hpp"
#include "storage/drain_store.hpp"

namespace surge::engine {

using steady = std::chrono::steady_clock;

void storage_worker::reload_subscribers(bool initial) {
  cadence_.reloaded(steady::now());
  try {
    auto rows = db_->load_subscribers(config_.subscribers);
    sendable_.clear();
    for (const auto& row : rows) sendable_.emplace_back(row.id, sends_now(row));
    std::vector<std::vector<storage::subscriber_row>> per_shard(shards_.size());
    for (auto& row : rows) {
      per_shard[static_cast<std::size_t>(row.id % static_cast<std::int64_t>(shards_.size()))]
          .push_back(std::move(row));
    }
    for (std::size_t i = 0; i < shards_.size(); ++i) {
      shards_[i]->on_subscribers(std::move(per_shard[i]));
    }
    if (!initial && backlog_watch_.periodic_sweep_due(steady::now())) sweep_stuck_rows();
  } catch (const storage::error& error) {
    if (initial) throw;
    if (stop_for_fault(error)) return;
    counters_.add(counters_.storage_errors);
    log_error(std::string("re-reading subscribers failed: ") + error.what());
  }
}

void storage_worker::sweep_stuck_rows() {
  backlog_watch_.swept(steady::now());
  const auto orphans = db_->dead_letter_orphans(proto::unix_now(), config_.subscribers);
  if (orphans > 0) {
    counters_.add(counters_.dead, orphans);
    log_warn("dead-lettered " + std::to_string(orphans) + " rows of unknown subscribers");
  }
  sweep_malformed_rows();
}

void storage_worker::sweep_malformed_rows() {
  // A lease longer than ours or the other drainer's 30 s, by a generous margin, is no lease.
  const double now = proto::unix_now();
  const auto longest =
      std::max<std::chrono::milliseconds>(config_.storage.lease, std::chrono::seconds(30));
  const double horizon =
      now + std::chrono::duration<double>(longest + config_.storage.max_lease_overrun).count();
  const auto found = db_->dead_letter_malformed(now, horizon, config_.subscribers);
  if (found.total() == 0) return;
  counters_.add(counters_.dead, found.total());
  log_warn("dead-lettered " + std::to_string(found.total()) +
           " rows no claim could ever match (next_attempt_at not a number: " +
           std::to_string(found.next_attempt_at) +
           ", locked_until not a number: " + std::to_string(found.locked_until) +
           ", locked_until beyond any lease: " + std::to_string(found.far_lease) +
           "); last_error says which, `surge dead replay` " + "puts them back");
}

void storage_worker::update_drainable() {
  // Rows of paused subscribers (inactive, rate 0 or unusable limits) and of held ones
  // (engine/observe/metrics.hpp: a circuit that stays open, unusable credentials, a refused
  // target, or a pause that outlasts --until-drained-wait) cannot be sent soon, so
  // --until-drained does not wait for them; everything else in the chosen set counts. A pause
  // shorter than pause_release_threshold keeps its rows in memory and is waited out.
  const auto wait =
      std::max(config_.until_drained_retry_wait, config_.scheduler.pause_release_threshold);
  const double horizon = proto::unix_now() + std::chrono::duration<double>(wait).count();
  std::vector<std::int64_t> blocked;
  for (const auto& held : metrics_.held_subscribers()) {
    if (held.until_unix == 0 || held.until_unix > horizon) blocked.push_back(held.id);
  }
  std::sort(blocked.begin(), blocked.end());
  bool any_excluded = false;
  std::string list;
  for (const auto& [id, sendable] : sendable_) {
    if (!sendable || std::binary_search(blocked.begin(), blocked.end(), id)) {
      any_excluded = true;
      continue;
    }
    if (!list.empty()) list += ',';
    list += std::to_string(id);
  }
  if (!any_excluded) {
    drainable_ = config_.subscribers;
  } else if (list.empty()) {
    drainable_ = proto::id_set::parse("0").value();  // no real subscriber has id 0
  } else {
    drainable_ = proto::id_set::parse(list).value();
  }
}

void storage_worker::ping_if_idle() {
  // /healthz reports the database reachable only if something succeeded lately; with no claims
  // or writes to make, a trivial read proves it.
  const auto now = steady::now();
  if (now - last_ping_ < std::chrono::seconds(1)) return;
  last_ping_ = now;
  check_queue_file();
  try {
    db_->ping();
    metrics_.beat_storage();
  } catch (const storage::error& error) {
    if (stop_for_fault(error)) return;
    counters_.add(counters_.storage_errors);
    log_error(std::string("database check failed: ") + error.what());
  }
}

void storage_worker::check_queue_file() {
  // SQLite keeps writing to a file that was deleted or renamed over: outcomes would land in a
  // file nobody reads and the new file's rows would never be claimed.
  if (queue_lost_) return;
  const auto lost = db_->missing_file();
  if (lost.empty()) return;
  stop_with_failure(lost);
}

std::vector<std::vector<std::int64_t>> storage_worker::split_by_shard(
    const std::vector<std::int64_t>& ids) const {
  std::vector<std::vector<std::int64_t>> per_shard(shards_.size());
  if (shards_.empty()) return per_shard;
  const auto shard_count = static_cast<std::int64_t>(shards_.size());
  for (const auto id : ids) per_shard[static_cast<std::size_t>(id % shard_count)].push_back(id);
  return per_shard;
}

void storage_worker::wake_subscribers(const std::vector<std::int64_t>& ids, bool all) {
  auto per_shard = split_by_shard(ids);
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    if (all || !per_shard[i].empty()) shards_[i]->on_new_rows(std::move(per_shard[i]), all);
  }
}

void storage_worker::wake_for_new_rows() {
  const auto now = steady::now();
  if (!cadence_.new_rows_check_due(now)) return;
  cadence_.new_rows_checked(now);
  try {
    auto found = db_->check_new_rows(proto::unix_now());
    if (!found.any()) return;
    counters_.add(counters_.new_row_wakes);
    wake_subscribers(found.subscribers, found.all);
  } catch (const storage::error& error) {
    // The idle poll still finds the rows; a failing database shows in the claims too.
    log(log_level::debug, std::string("looking for new rows failed: ") + error.what());
  }
}

std::int64_t storage_worker::finished_rows() const {
  return counters_.delivered.load(std::memory_order_relaxed) +
         counters_.dead.load(std::memory_order_relaxed) +
         counters_.coalesced.load(std::memory_order_relaxed);
}

std::int64_t storage_worker::without_quarantined(std::int64_t outstanding) const {
  // Quarantined rows stay unfinished in the queue, and no claim of this drain takes them: they
  // are not waited for. (One another program finished meanwhile makes this an underestimate.)
  return std::max<std::int64_t>(0, outstanding - static_cast<std::int64_t>(quarantined_.size()));
}

void storage_worker::check_drained() {
  cadence_.backlog_checked(steady::now());
  // Outcomes held for their commit (engine/store/commit_timing.hpp) would make this check skip; a
  // check comes at most every few hundred milliseconds, so write them now.
  write_outcomes(true);
  if (!pending_outcomes_.empty() || !pending_claims_.empty()) {
    backlog_watch_.interrupted();
    return;
  }
  try {
    update_drainable();
    const double now = proto::unix_now();
    const auto count_began = steady::now();
    const auto finished_before_count = finished_rows();
    auto outstanding = without_quarantined(db_->count_outstanding(now, drainable_));
    cadence_.backlog_counted(steady::now() - count_began);
    backlog_estimate_.counted(outstanding, finished_before_count);
    counters_.backlog.store(outstanding, std::memory_order_relaxed);
    const auto earliest = db_->earliest_scheduled(now, drainable_);
    metrics_.oldest_due_age.store(earliest ? std::max(0.0, now - *earliest) : 0.0,
                                  std::memory_order_relaxed);
    metrics_.beat_storage();
    backlog_watch_.observe(counters_.in_flight.load() == 0 && counters_.buffered.load() == 0,
                           rows_handed_out_);
    if (backlog_watch_.sweep_due(outstanding, steady::now())) {
      sweep_stuck_rows();
      outstanding = without_quarantined(db_->count_outstanding(now, drainable_));
      backlog_estimate_.counted(outstanding, finished_rows());
      counters_.backlog.store(outstanding, std::memory_order_relaxed);
    }
    bool due_soon = false;
    if (backlog_watch_.shards_empty() && outstanding == 0 &&
        config_.until_drained_retry_wait.count() > 0) {
      const auto next = db_->earliest_scheduled(now, drainable_);
      const double wait = std::chrono::duration<double>(config_.until_drained_retry_wait).count();
      due_soon = next && *next - now <= wait;
    }
    if (backlog_watch_.drained(outstanding, due_soon) && config_.until_drained &&
        drained_callback_) {
      drained_callback_();
      drained_callback_ = nullptr;
    }
  } catch (const storage::error& error) {
    if (stop_for_fault(error)) return;
    counters_.add(counters_.storage_errors);
    log_error(std::string("checking the backlog failed: ") + error.what());
  }
}

}  // namespace surge::engine
