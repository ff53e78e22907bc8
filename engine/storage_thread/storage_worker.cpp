#include "engine/storage_thread/storage_worker.hpp"

#include <pthread.h>

#include <iterator>
#include <utility>

#include "storage/drain_store.hpp"

namespace surge::engine {

using steady = std::chrono::steady_clock;

storage_worker::storage_worker(const drain_config& config, drain_metrics& metrics)
    : config_(config), metrics_(metrics) {
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
                                         static_cast<int>(shards_.size()), metrics_.counters, log_);
  executor_ = std::make_unique<storage_executor>(
      storage_executor_config{
          .subscribers = config_.subscribers,
          .until_drained = {.retry_wait = config_.until_drained_retry_wait,
                            .pause_release_threshold = config_.scheduler.pause_release_threshold}},
      *core_, *db_, shards_, metrics_, log_, storage_clocks::real());
  executor_->on_drained = [this] {
    if (!drained_callback_) return;
    drained_callback_();
    drained_callback_ = nullptr;
  };
  executor_->on_fatal = [this](std::string why) {
    if (fatal_callback_) fatal_callback_(std::move(why));
  };
  // The first reload (which throws: a queue that cannot be read fails the start) and the first
  // ownership renewal, before any shard claims.
  core_->begin(steady::now());
  executor_->perform_due();
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
    executor_->perform_due();
    executor_->publish_wal_counters();
    if (core_->finished()) {
      finished_.store(true);
      return;
    }
  }
}

}  // namespace surge::engine
