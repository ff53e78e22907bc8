#include "engine/storage_thread/coalesce_sweeper.hpp"

#include <unordered_map>

#include <pthread.h>

#include <algorithm>
#include <exception>
#include <vector>

#include "engine/observe/log.hpp"
#include "engine/subscriber_settings.hpp"
#include "proto/clock.hpp"
#include "proto/coalesce.hpp"
#include "storage/coalescing.hpp"
#include "storage/subscribers.hpp"

namespace surge::engine {

coalesce_sweeper::coalesce_sweeper(coalesce_sweeper_config config, drain_counters& counters,
                                   sweep_judgement& judgement)
    : config_(std::move(config)), counters_(counters), judgement_(judgement) {
  lock_wait_.timeout = config_.busy_timeout;
  thread_ = std::thread([this] { run(); });
}

coalesce_sweeper::~coalesce_sweeper() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  lock_wait_.give_up = true;
  wake_.notify_all();
  thread_.join();
}

void coalesce_sweeper::run() {
  pthread_setname_np(pthread_self(), "surge-coalesce");
  bool warned = false;
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    try {
      sweep_once();
      warned = false;
    } catch (const std::exception& error) {
      // Busy or failing database: the storage thread reports it; the next sweep tries again, on
      // a new connection.
      db_.reset();
      if (!warned) {
        log_warn(std::string("coalescing the backlog failed (rows queued since the last sweep "
                             "wait for the next one): ") +
                 error.what());
      }
      warned = true;
    }
    lock.lock();
    wake_.wait_for(lock, config_.interval, [this] { return stopping_; });
  }
}

void coalesce_sweeper::sweep_once() {
  if (!db_) {
    db_.emplace(storage::connection_config{.location = config_.db_path,
                                           .create_if_missing = false,
                                           .lock_wait = &lock_wait_,
                                           .shape = config_.shape});
  }
  auto& db = *db_;
  for (const auto& subscriber : storage::load_subscribers(db, config_.subscribers)) {
    if (!subscriber.active || subscriber.coalesce_key.empty()) continue;
    // The same rule the shard applies, with the same checks on stored values.
    const auto settings = derive_settings(subscriber, scheduler_config{});
    if (!settings.coalesce) continue;
    const auto backlog =
        storage::read_unheld_due_rows(db, subscriber.id, proto::unix_now(), config_.max_rows,
                                      config_.max_payload_bytes, config_.max_bytes);
    const auto& rows = backlog.rows;
    std::vector<proto::coalesce_candidate> candidates;
    candidates.reserve(rows.size());
    for (const auto& row : rows) {
      candidates.push_back(
          {.id = row.id,
           .created_at = row.created_at,
           .key = row.payload.empty()
                      ? std::nullopt
                      : proto::coalesce_key(*settings.coalesce, row.event_type, row.payload),
           .stands_since = row.coalesced_since});
    }
    const auto replaced_by = proto::plan_coalescing(candidates, settings.coalesce->window_seconds);
    std::vector<storage::replacement> marks;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (replaced_by[i] != 0) marks.push_back({.id = rows[i].id, .replaced_by = replaced_by[i]});
    }
    // What each kept row stands for once all its merges are in: the oldest of them.
    std::unordered_map<std::int64_t, proto::coalesce_candidate> keepers;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (replaced_by[i] == 0) keepers.emplace(rows[i].id, candidates[i]);
    }
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (replaced_by[i] == 0) continue;
      auto& keeper = keepers.at(replaced_by[i]);
      keeper.stands_since = proto::stands_since_after_merge(keeper, candidates[i]);
    }
    for (auto& mark : marks) mark.stands_since = *keepers.at(mark.replaced_by).stands_since;
    for (std::size_t at = 0; at < marks.size(); at += config_.rows_per_transaction) {
      if (lock_wait_.give_up) return;
      const auto count =
          std::min(marks.size() - at, static_cast<std::size_t>(config_.rows_per_transaction));
      const int marked =
          storage::mark_coalesced(db, std::span(marks).subspan(at, count), proto::unix_now());
      counters_.add(counters_.coalesced, marked);
    }
    judgement_.judged(subscriber.id, backlog.judged_through, std::chrono::steady_clock::now());
  }
}

}  // namespace surge::engine
