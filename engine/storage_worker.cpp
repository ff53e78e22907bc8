#include "engine/storage_worker.hpp"

#include <algorithm>
#include <cstdint>
#include <unordered_set>

#include <SQLiteCpp/Exception.h>

#include "engine/log.hpp"
#include "engine/subscriber.hpp"
#include "storage/database.hpp"
#include "storage/maintenance.hpp"
#include "storage/queue.hpp"

namespace surge::engine {

using steady = std::chrono::steady_clock;

struct storage_worker::db_state {
  db_state(const storage_worker_config& config, const storage::interruptible_wait& lock_wait)
      : db(storage::open_database({.path = config.db_path,
                                   .busy_timeout = config.busy_timeout,
                                   .create_if_missing = false,
                                   .lock_wait = &lock_wait})),
        file(storage::identify_file(config.db_path)),
        claims(db),
        writer(db) {}
  SQLite::Database db;
  std::optional<storage::file_identity> file;  // what the path named when it was opened
  storage::claimer claims;
  storage::outcome_writer writer;
};

storage_worker::storage_worker(const drain_config& config, drain_metrics& metrics)
    : config_(config), metrics_(metrics), counters_(metrics.counters) {
  lock_wait_.timeout = config_.storage.busy_timeout;
}

storage_worker::~storage_worker() { join(); }

void storage_worker::attach(std::vector<shard_endpoint*> shards) { shards_ = std::move(shards); }

void storage_worker::start() {
  // Opened here so that a bad path fails at start-up, before any thread runs.
  db_ = std::make_unique<db_state>(config_.storage, lock_wait_);
  reload_subscribers(true);
  thread_ = std::thread([this] { run(); });
}

void storage_worker::join() {
  if (thread_.joinable()) thread_.join();
}

void storage_worker::request_claims(int shard, std::vector<storage::subscriber_demand> demand) {
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
    urgent = inbox_.outcomes.size() >= config_.storage.commit_rows;
  }
  if (urgent) wake_.notify_one();
}

void storage_worker::submit_buckets(std::vector<storage::bucket_state> buckets) {
  {
    std::lock_guard lock(mutex_);
    inbox_.buckets.insert(inbox_.buckets.end(), buckets.begin(), buckets.end());
    ++inbox_.bucket_batches;
  }
  wake_.notify_one();
}

void storage_worker::stop_claiming() {
  {
    std::lock_guard lock(mutex_);
    claiming_ = false;
  }
  wake_.notify_one();
}

void storage_worker::finish(int shards_done_expected) {
  {
    std::lock_guard lock(mutex_);
    finish_expected_ = shards_done_expected;
  }
  wake_.notify_one();
}

void storage_worker::abandon() {
  {
    std::lock_guard lock(mutex_);
    lock_wait_.give_up.store(true);
  }
  wake_.notify_one();
}

void storage_worker::run() {
  while (true) {
    bool claiming = false;
    int finish_expected = -1;
    {
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, config_.storage.commit_interval, [this] {
        return !inbox_.claims.empty() || inbox_.outcomes.size() >= config_.storage.commit_rows ||
               inbox_.bucket_batches > 0 || finish_expected_ >= 0;
      });
      std::move(inbox_.outcomes.begin(), inbox_.outcomes.end(),
                std::back_inserter(pending_outcomes_));
      inbox_.outcomes.clear();
      pending_deactivate_.insert(pending_deactivate_.end(), inbox_.deactivate.begin(),
                                 inbox_.deactivate.end());
      inbox_.deactivate.clear();
      for (auto& request : inbox_.claims) pending_claims_.push_back(std::move(request));
      inbox_.claims.clear();
      pending_buckets_.insert(pending_buckets_.end(), inbox_.buckets.begin(),
                              inbox_.buckets.end());
      inbox_.buckets.clear();
      bucket_batches_ += std::exchange(inbox_.bucket_batches, 0);
      claiming = claiming_;
      finish_expected = finish_expected_;
    }

    write_outcomes(false);
    ping_if_idle();
    if (claiming) {
      answer_claims();
      const auto now = steady::now();
      if (now - last_reload_ >= config_.storage.subscriber_reload_interval) {
        reload_subscribers(false);
      }
      // Counting a large backlog scans the due index, so it is done rarely while it is large.
      // Once nothing is in flight or buffered the end may be near whatever the last count
      // said, so --until-drained exits promptly after the last delivery.
      const auto backlog = counters_.backlog.load(std::memory_order_relaxed);
      const bool shards_idle = counters_.in_flight.load(std::memory_order_relaxed) == 0 &&
                               counters_.buffered.load(std::memory_order_relaxed) == 0;
      const auto check_every = (backlog < 0 || backlog > 1000) && !shards_idle
                                   ? config_.storage.backlog_refresh_interval
                                   : config_.storage.drained_check_interval;
      if (now - last_drained_check_ >= check_every) {
        check_drained();
      }
    } else if (!pending_claims_.empty()) {
      // Claiming stopped: answer with nothing so that shards do not wait for rows.
      for (auto& [shard, demand] : pending_claims_) {
        shards_[static_cast<std::size_t>(shard)]->on_claimed({std::move(demand), {}});
      }
      pending_claims_.clear();
    }

    if (finish_expected >= 0 && bucket_batches_ >= finish_expected) {
      write_outcomes(true);
      if (!pending_buckets_.empty()) {
        try {
          storage::save_buckets(db_->db, pending_buckets_);
          pending_buckets_.clear();
        } catch (const SQLite::Exception& error) {
          log_error(std::string("could not write token buckets back: ") + error.what());
        }
      }
      if (pending_outcomes_.empty()) {
        try {
          remaining_ = storage::count_outstanding(db_->db, storage::unix_now(), config_.subscribers);
        } catch (const SQLite::Exception&) {
          remaining_ = -1;
        }
        finished_.store(true);
        return;
      }
      if (lock_wait_.give_up.load()) {
        give_up_writing();
        return;
      }
      // Outcomes that could not be written yet: keep trying until the database takes them or
      // the stop's deadline passes (abandon()).
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, config_.storage.error_backoff, [this] { return lock_wait_.give_up.load(); });
    }
  }
}

void storage_worker::give_up_writing() {
  unwritten_ = static_cast<std::int64_t>(pending_outcomes_.size());
  if (unwritten_ > 0) {
    double lease_ends = 0;
    for (const auto& outcome : pending_outcomes_) lease_ends = std::max(lease_ends, outcome.lease);
    const auto wait = std::max(0.0, lease_ends - storage::unix_now());
    log_error("stopped before the database took the outcomes of " + std::to_string(unwritten_) +
              " rows; their leases end within " + std::to_string(static_cast<long long>(wait + 1)) +
              " s and they will be sent again then (at-least-once)");
  }
  finished_.store(true);
}

void storage_worker::write_outcomes(bool force) {
  if (pending_outcomes_.empty() && pending_deactivate_.empty()) return;
  const auto now = steady::now();
  if (now < retry_storage_after_) return;
  if (!force && pending_outcomes_.size() < config_.storage.commit_rows &&
      now - last_commit_ < config_.storage.commit_interval) {
    return;
  }
  try {
    std::size_t offset = 0;
    while (offset < pending_outcomes_.size() || !pending_deactivate_.empty()) {
      const auto count = std::min(config_.storage.commit_rows, pending_outcomes_.size() - offset);
      std::span<const storage::outcome> batch(pending_outcomes_.data() + offset, count);
      const auto started = steady::now();
      const auto report = db_->writer.write(batch, pending_deactivate_);
      metrics_.commit_duration.observe(std::chrono::duration<double>(steady::now() - started).count());
      metrics_.commit_rows.observe(static_cast<double>(count));
      metrics_.beat_storage();
      pending_deactivate_.clear();
      offset += count;
      if (!report.lost_leases.empty()) {
        counters_.add(counters_.lost_leases, static_cast<std::int64_t>(report.lost_leases.size()));
        log_warn("lost the lease of " + std::to_string(report.lost_leases.size()) +
                 " rows (first id " + std::to_string(report.lost_leases.front()) +
                 "): another drainer took them after the lease expired");
      }
    }
    pending_outcomes_.clear();
    last_commit_ = now;
  } catch (const SQLite::Exception& error) {
    counters_.add(counters_.storage_errors);
    retry_storage_after_ = now + config_.storage.error_backoff;
    log_error(std::string("writing outcomes failed, will retry and claim nothing meanwhile: ") +
              error.what());
  }
}

void storage_worker::answer_claims() {
  if (pending_claims_.empty()) return;
  const auto now = steady::now();
  // While the database refuses writes, claiming more would only grow what is held in memory.
  if (now < retry_storage_after_) return;
  std::vector<storage::subscriber_demand> all;
  for (const auto& [shard, demand] : pending_claims_) all.insert(all.end(), demand.begin(), demand.end());
  std::vector<storage::claimed_row> rows;
  try {
    const double lease_seconds = std::chrono::duration<double>(config_.storage.lease).count();
    const auto started = steady::now();
    rows = db_->claims.claim(all, storage::unix_now(), lease_seconds,
                             static_cast<std::int64_t>(std::min<std::size_t>(
                                 config_.scheduler.max_payload_bytes, INT64_MAX)));
    metrics_.claim_duration.observe(std::chrono::duration<double>(steady::now() - started).count());
    metrics_.claim_rows.observe(static_cast<double>(rows.size()));
    metrics_.beat_storage();
  } catch (const SQLite::Exception& error) {
    counters_.add(counters_.storage_errors);
    retry_storage_after_ = now + config_.storage.error_backoff;
    log_error(std::string("claiming failed, will retry: ") + error.what());
    rows.clear();
  }
  const auto shard_count = static_cast<std::int64_t>(shards_.size());
  std::vector<claim_reply> replies(shards_.size());
  for (auto& [shard, demand] : pending_claims_) {
    replies[static_cast<std::size_t>(shard)].asked = std::move(demand);
  }
  for (auto& row : rows) {
    replies[static_cast<std::size_t>(row.subscriber_id % shard_count)].rows.push_back(std::move(row));
  }
  for (auto& [shard, demand] : pending_claims_) {
    (void)demand;
    shards_[static_cast<std::size_t>(shard)]->on_claimed(
        std::move(replies[static_cast<std::size_t>(shard)]));
  }
  pending_claims_.clear();
}

void storage_worker::reload_subscribers(bool initial) {
  last_reload_ = steady::now();
  try {
    auto rows = storage::load_subscribers(db_->db, config_.subscribers);
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
    // Orphan rows are rare and finding them reads the due index, so look only now and then.
    if (reloads_++ % orphan_sweep_every == 0) {
      const auto orphans = storage::dead_letter_orphans(db_->db, storage::unix_now(),
                                                        config_.subscribers);
      if (orphans > 0) {
        counters_.add(counters_.dead, orphans);
        log_warn("dead-lettered " + std::to_string(orphans) + " rows of unknown subscribers");
      }
      sweep_malformed_rows();
    }
  } catch (const SQLite::Exception& error) {
    if (initial) throw;
    counters_.add(counters_.storage_errors);
    log_error(std::string("re-reading subscribers failed: ") + error.what());
  }
}

void storage_worker::sweep_malformed_rows() {
  // A lease longer than ours or the other drainer's 30 s, by a generous margin, is no lease.
  const double now = storage::unix_now();
  const auto longest =
      std::max<std::chrono::milliseconds>(config_.storage.lease, std::chrono::seconds(30));
  const double horizon =
      now + std::chrono::duration<double>(longest + config_.storage.max_lease_overrun).count();
  const auto found = storage::dead_letter_malformed(db_->db, now, horizon, config_.subscribers);
  if (found.total() == 0) return;
  counters_.add(counters_.dead, found.total());
  log_warn("dead-lettered " + std::to_string(found.total()) +
           " rows no claim could ever match (next_attempt_at not a number: " +
           std::to_string(found.next_attempt_at) + ", locked_until not a number: " +
           std::to_string(found.locked_until) + ", locked_until beyond any lease: " +
           std::to_string(found.far_lease) + "); last_error says which, `surge dead replay` " +
           "puts them back");
}

void storage_worker::update_drainable() {
  // Rows of paused subscribers (inactive, rate 0 or unusable limits) and of subscribers whose
  // circuit stays open probe after probe cannot be sent now, so --until-drained does not wait
  // for them; everything else in the chosen set counts.
  auto blocked = metrics_.blocked_subscribers();
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
    db_->db.execAndGet("SELECT COUNT(*) FROM surge_schema_version");
    metrics_.beat_storage();
  } catch (const SQLite::Exception& error) {
    counters_.add(counters_.storage_errors);
    log_error(std::string("database check failed: ") + error.what());
  }
}

void storage_worker::check_queue_file() {
  // SQLite keeps writing to a file that was deleted or renamed over: outcomes would land in a
  // file nobody reads and the new file's rows would never be claimed.
  if (queue_lost_ || !db_->file) return;
  if (storage::identify_file(config_.storage.db_path) == db_->file) return;
  queue_lost_ = true;
  std::string why = "the queue file " + config_.storage.db_path +
                    " was deleted or replaced while draining; stopped claiming from it";
  log_error(why);
  {
    std::lock_guard lock(mutex_);
    claiming_ = false;
  }
  if (fatal_callback_) fatal_callback_(std::move(why));
}

void storage_worker::check_drained() {
  last_drained_check_ = steady::now();
  if (!pending_outcomes_.empty() || !pending_claims_.empty()) {
    quiet_checks_ = 0;
    return;
  }
  try {
    update_drainable();
    const double now = storage::unix_now();
    const auto outstanding = storage::count_outstanding(db_->db, now, drainable_);
    counters_.backlog.store(outstanding, std::memory_order_relaxed);
    const auto earliest = storage::earliest_scheduled(db_->db, now, drainable_);
    metrics_.oldest_due_age.store(earliest ? std::max(0.0, now - *earliest) : 0.0,
                                  std::memory_order_relaxed);
    metrics_.beat_storage();
    bool idle = counters_.in_flight.load() == 0 && counters_.buffered.load() == 0;
    if (idle && outstanding == 0 && config_.until_drained_retry_wait.count() > 0) {
      const auto next = storage::earliest_scheduled(db_->db, now, drainable_);
      const double wait = std::chrono::duration<double>(config_.until_drained_retry_wait).count();
      if (next && *next - now <= wait) idle = false;
    }
    // Two quiet checks in a row: a claim answer may still be on its way to a shard.
    quiet_checks_ = (outstanding == 0 && idle) ? quiet_checks_ + 1 : 0;
    if (config_.until_drained && quiet_checks_ >= 2 && drained_callback_) {
      drained_callback_();
      drained_callback_ = nullptr;
    }
  } catch (const SQLite::Exception& error) {
    counters_.add(counters_.storage_errors);
    log_error(std::string("checking the backlog failed: ") + error.what());
  }
}

}  // namespace surge::engine
