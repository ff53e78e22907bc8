#include "engine/storage_thread/storage_worker.hpp"

#include <pthread.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <type_traits>

#include "engine/observe/log.hpp"
#include "engine/storage_thread/until_drained.hpp"
#include "engine/subscriber_settings.hpp"
#include "proto/clock.hpp"
#include "storage/drain_store.hpp"

namespace surge::engine {

using steady = std::chrono::steady_clock;

storage_worker::storage_worker(const drain_config& config, drain_metrics& metrics)
    : config_(config), metrics_(metrics), counters_(metrics.counters) {
  lock_wait_.timeout = config_.storage.busy_timeout;
}

storage_worker::~storage_worker() { join(); }

void storage_worker::attach(std::vector<shard_endpoint*> shards) { shards_ = std::move(shards); }

void storage_worker::start() {
  // Opened here so that a bad path fails at start-up, before any thread runs.
  const auto& storage = config_.storage;
  db_ = storage::open_drain_store(
      {.location = storage.db_path,
       .busy_timeout = storage.busy_timeout,
       .lock_wait = &lock_wait_,
       .cache_kib = storage.cache_kib,
       .checkpoint_frames = storage.checkpoint_frames,
       .token_reserve_seconds = std::chrono::duration<double>(storage.token_reserve).count(),
       .ownership_heartbeat_seconds =
           std::chrono::duration<double>(storage.ownership_heartbeat).count(),
       .allowed = config_.subscribers,
       .shape = storage.shape});
  core_ = std::make_unique<storage_core>(storage_core_config::of(config_),
                                         static_cast<int>(shards_.size()), counters_, log_);
  // The first reload (which throws: a queue that cannot be read fails the start) and the first
  // ownership renewal, before any shard claims.
  core_->begin(steady::now());
  while (auto action = core_->next_action(steady::now())) perform(*action);
  thread_ = std::thread([this] { run(); });
}

void storage_worker::join() {
  if (thread_.joinable()) thread_.join();
}

void storage_worker::request_claims(int shard, std::vector<storage::subscriber_demand> demand) {
  judgement_.bound(demand, std::chrono::steady_clock::now());
  {
    std::lock_guard lock(mutex_);
    inbox_.claims.emplace_back(shard, std::move(demand));
  }
  wake_.notify_one();
}

void storage_worker::submit(std::vector<storage::outcome> outcomes,
                            std::vector<std::int64_t> deactivate) {
  bool urgent = false;
  {
    std::lock_guard lock(mutex_);
    if (inbox_.outcomes.empty()) {
      inbox_.outcomes = std::move(outcomes);
    } else {
      std::move(outcomes.begin(), outcomes.end(), std::back_inserter(inbox_.outcomes));
    }
    inbox_.deactivate.insert(inbox_.deactivate.end(), deactivate.begin(), deactivate.end());
    urgent = inbox_.outcomes.size() >= config_.storage.outcome_commits.rows;
  }
  if (urgent) wake_.notify_one();
}

void storage_worker::submit_unspent(std::vector<storage::unspent_tokens> tokens) {
  {
    std::lock_guard lock(mutex_);
    inbox_.unspent.push_back(std::move(tokens));
  }
  wake_.notify_one();
}

void storage_worker::submit_quotas(std::vector<storage::partner_quota_row> rows) {
  std::lock_guard lock(mutex_);
  std::move(rows.begin(), rows.end(), std::back_inserter(inbox_.quotas));
}

void storage_worker::stop_claiming() {
  {
    std::lock_guard lock(mutex_);
    inbox_.stop_claiming = true;
    inbox_.news = true;
  }
  wake_.notify_one();
}

void storage_worker::finish(int shards_done_expected) {
  {
    std::lock_guard lock(mutex_);
    inbox_.finish_expected = shards_done_expected;
    inbox_.news = true;
  }
  wake_.notify_one();
}

void storage_worker::abandon() {
  {
    std::lock_guard lock(mutex_);
    lock_wait_.give_up.store(true);
    inbox_.abandoned = true;
    inbox_.news = true;
  }
  wake_.notify_one();
}

void storage_worker::run() {
  pthread_setname_np(pthread_self(), "surge-storage");
  while (true) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait_until(lock, core_->next_wake(), [this] {
        return !inbox_.claims.empty() || core_->commit_due_with(inbox_.outcomes.size()) ||
               !inbox_.unspent.empty() || inbox_.news;
      });
      core_->outcomes_submitted(std::exchange(inbox_.outcomes, {}),
                                std::exchange(inbox_.deactivate, {}));
      for (auto& [shard, demand] : inbox_.claims) core_->claims_asked(shard, std::move(demand));
      inbox_.claims.clear();
      for (auto& tokens : inbox_.unspent) core_->tokens_returned(std::move(tokens));
      inbox_.unspent.clear();
      if (!inbox_.quotas.empty()) core_->quotas_announced(std::exchange(inbox_.quotas, {}));
      if (inbox_.stop_claiming) core_->stop_claiming();
      if (inbox_.finish_expected >= 0) core_->finish(inbox_.finish_expected);
      if (inbox_.abandoned) core_->abandon();
      inbox_.news = false;
    }
    core_->tick(steady::now());
    while (auto action = core_->next_action(steady::now())) perform(*action);
    publish_wal_counters();
    if (core_->finished()) {
      finished_.store(true);
      return;
    }
  }
}

void storage_worker::perform(storage_action& action) {
  std::visit(
      [this](auto& act) {
        using kind = std::decay_t<decltype(act)>;
        const auto started = steady::now();
        try {
          if constexpr (std::is_same_v<kind, storage_do::check_new_rows>) {
            check_new_rows();
          } else if constexpr (std::is_same_v<kind, storage_do::run_cycle>) {
            auto result = db_->write_and_claim(
                act.outcomes, act.deactivate, act.demand, proto::unix_now(),
                std::chrono::duration<double>(act.lease).count(), act.max_payload_bytes);
            const auto took = steady::now() - started;
            if (!act.outcomes.empty() || !act.deactivate.empty()) {
              note_written(act.outcomes.size(), took);
            }
            metrics_.claim_duration.observe(std::chrono::duration<double>(took).count());
            metrics_.claim_rows.observe(static_cast<double>(result.claimed.size()));
            metrics_.beat_storage();
            core_->cycle_done(steady::now(), std::move(result));
          } else if constexpr (std::is_same_v<kind, storage_do::write_outcomes>) {
            const auto report = db_->write_outcomes(act.outcomes, act.deactivate);
            note_written(act.outcomes.size(), steady::now() - started);
            core_->outcomes_written(steady::now(), report);
          } else if constexpr (std::is_same_v<kind, storage_do::write_quotas>) {
            db_->record_partner_quotas(act.rows);
            core_->done(steady::now());
          } else if constexpr (std::is_same_v<kind, storage_do::check_database>) {
            if (act.look_for_file) {
              if (auto lost = db_->missing_file(); !lost.empty()) core_->queue_lost(lost);
            }
            db_->ping();
            metrics_.beat_storage();
            core_->done(steady::now());
          } else if constexpr (std::is_same_v<kind, storage_do::reload_subscribers>) {
            reload_subscribers(act.initial);
          } else if constexpr (std::is_same_v<kind, storage_do::renew_ownership>) {
            const auto change = db_->renew_ownership(proto::unix_now());
            const auto owned = static_cast<std::int64_t>(db_->owned_count(proto::unix_now()));
            core_->ownership_renewed(steady::now(), change, owned);
          } else if constexpr (std::is_same_v<kind, storage_do::release_ownership>) {
            db_->release_ownership();
            core_->done(steady::now());
          } else if constexpr (std::is_same_v<kind, storage_do::count_backlog>) {
            count_backlog();
          } else if constexpr (std::is_same_v<kind, storage_do::sweep_stuck_rows>) {
            const double now = proto::unix_now();
            const auto orphans = db_->dead_letter_orphans(now, config_.subscribers);
            const auto found = db_->dead_letter_malformed(now, now + act.lease_horizon.count(),
                                                          config_.subscribers);
            core_->swept(steady::now(), orphans, found);
          } else if constexpr (std::is_same_v<kind, storage_do::count_remaining>) {
            core_->remaining_counted(
                db_->count_outstanding(proto::unix_now(), config_.subscribers));
          } else if constexpr (std::is_same_v<kind, storage_do::give_back_tokens>) {
            db_->give_back_tokens(act.tokens, proto::unix_now());
            core_->done(steady::now());
          } else if constexpr (std::is_same_v<kind, storage_do::answer_shard>) {
            shards_[static_cast<std::size_t>(act.shard)]->on_claimed(std::move(act.reply));
          } else if constexpr (std::is_same_v<kind, storage_do::tell_owner_change>) {
            auto per_shard = split_by_shard(act.subscribers);
            for (std::size_t i = 0; i < shards_.size(); ++i) {
              if (per_shard[i].empty()) continue;
              if (act.taken) {
                shards_[i]->on_taken(std::move(per_shard[i]));
              } else {
                shards_[i]->on_disowned(std::move(per_shard[i]));
              }
            }
          } else if constexpr (std::is_same_v<kind, storage_do::stop_drain>) {
            if (fatal_callback_) fatal_callback_(std::move(act.why));
          } else if constexpr (std::is_same_v<kind, storage_do::drained>) {
            if (drained_callback_) {
              drained_callback_();
              drained_callback_ = nullptr;
            }
          } else if constexpr (std::is_same_v<kind, storage_do::finish>) {
            remaining_ = act.remaining;
            unwritten_ = act.unwritten;
            if (unwritten_ > 0) {
              const auto wait = std::max(0.0, act.last_lease - proto::unix_now());
              log_error("stopped before the database took the outcomes of " +
                        std::to_string(unwritten_) + " rows; their leases end within " +
                        std::to_string(static_cast<long long>(wait + 1)) +
                        " s and they will be sent again then (at-least-once)");
            }
            publish_wal_counters();
            rescue_report_ = db_->rescue_lost_log();
          }
        } catch (const storage::error& error) {
          if constexpr (std::is_same_v<kind, storage_do::reload_subscribers>) {
            if (act.initial) throw;
          }
          core_->failed(steady::now(), error);
        }
      },
      action);
}

void storage_worker::reload_subscribers(bool initial) {
  (void)initial;
  auto rows = db_->load_subscribers(config_.subscribers);
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
  core_->subscribers_loaded(steady::now(), std::move(sendable));
}

void storage_worker::check_new_rows() {
  try {
    auto found = db_->check_new_rows(proto::unix_now());
    if (!found.any()) return;
    counters_.add(counters_.new_row_wakes);
    auto per_shard = split_by_shard(found.subscribers);
    for (std::size_t i = 0; i < shards_.size(); ++i) {
      if (found.all || !per_shard[i].empty()) {
        shards_[i]->on_new_rows(std::move(per_shard[i]), found.all);
      }
    }
  } catch (const storage::error& error) {
    // The idle poll still finds the rows; a failing database shows in the claims too.
    log(log_level::debug, std::string("looking for new rows failed: ") + error.what());
  }
}

proto::id_set storage_worker::drainable() const {
  return drainable_subscribers(
      config_.subscribers,
      {.retry_wait = config_.until_drained_retry_wait,
       .pause_release_threshold = config_.scheduler.pause_release_threshold},
      proto::unix_now(), core_->sendable(), metrics_.held_subscribers());
}

void storage_worker::count_backlog() {
  const auto which = drainable();
  const double now = proto::unix_now();
  const auto began = steady::now();
  const auto outstanding = db_->count_outstanding(now, which);
  const auto earliest = db_->earliest_scheduled(now, which);
  // Both reads are the check's cost, which spaces the next one (backlog_check_interval).
  const auto took = steady::now() - began;
  metrics_.oldest_due_age.store(earliest ? std::max(0.0, now - *earliest) : 0.0,
                                std::memory_order_relaxed);
  metrics_.beat_storage();
  std::optional<double> earliest_in;
  if (earliest) earliest_in = *earliest - now;
  core_->backlog_counted(steady::now(), outstanding, earliest_in, took);
}

std::vector<std::vector<std::int64_t>> storage_worker::split_by_shard(
    const std::vector<std::int64_t>& ids) const {
  std::vector<std::vector<std::int64_t>> per_shard(shards_.size());
  if (shards_.empty()) return per_shard;
  for (const auto id : ids) per_shard[shard_of(id, shards_.size())].push_back(id);
  return per_shard;
}

void storage_worker::note_written(std::size_t rows, steady::duration took) {
  metrics_.commit_duration.observe(std::chrono::duration<double>(took).count());
  metrics_.commit_rows.observe(static_cast<double>(rows));
  metrics_.beat_storage();
}

void storage_worker::publish_wal_counters() {
  const auto written = db_->counters();
  counters_.wal_commits.store(written.commits, std::memory_order_relaxed);
  counters_.wal_frames.store(written.frames, std::memory_order_relaxed);
}

}  // namespace surge::engine
