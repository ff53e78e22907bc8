#include "engine/store/storage_worker.hpp"

#include <pthread.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_set>

#include "engine/observe/log.hpp"
#include "engine/subscriber_settings.hpp"
#include "proto/clock.hpp"
#include "storage/drain_store.hpp"

namespace surge::engine {

using steady = std::chrono::steady_clock;

storage_worker::storage_worker(const drain_config& config, drain_metrics& metrics)
    : config_(config), metrics_(metrics), counters_(metrics.counters), cadence_(config.storage) {
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
  reload_subscribers(true);
  // Before the first claim: a drain alone on the queue owns every subscriber from the start.
  renew_ownership(true);
  cadence_.started(steady::now());
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
    urgent = inbox_.outcomes.size() >= config_.storage.outcome_commits.rows;
  }
  if (urgent) wake_.notify_one();
}

void storage_worker::submit_unspent(std::vector<storage::unspent_tokens> tokens) {
  {
    std::lock_guard lock(mutex_);
    inbox_.unspent.insert(inbox_.unspent.end(), tokens.begin(), tokens.end());
    ++inbox_.unspent_batches;
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
  pthread_setname_np(pthread_self(), "surge-storage");
  while (true) {
    bool claiming = false;
    int finish_expected = -1;
    {
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, config_.storage.wake_interval, [this] {
        return !inbox_.claims.empty() ||
               inbox_.outcomes.size() + pending_outcomes_.size() >=
                   config_.storage.outcome_commits.rows ||
               inbox_.unspent_batches > 0 || finish_expected_ >= 0;
      });
      std::move(inbox_.outcomes.begin(), inbox_.outcomes.end(),
                std::back_inserter(pending_outcomes_));
      inbox_.outcomes.clear();
      pending_deactivate_.insert(pending_deactivate_.end(), inbox_.deactivate.begin(),
                                 inbox_.deactivate.end());
      inbox_.deactivate.clear();
      for (auto& request : inbox_.claims) pending_claims_.push_back(std::move(request));
      inbox_.claims.clear();
      pending_unspent_.insert(pending_unspent_.end(), inbox_.unspent.begin(), inbox_.unspent.end());
      inbox_.unspent.clear();
      unspent_batches_ += std::exchange(inbox_.unspent_batches, 0);
      std::move(inbox_.quotas.begin(), inbox_.quotas.end(), std::back_inserter(pending_quotas_));
      inbox_.quotas.clear();
      claiming = claiming_;
      finish_expected = finish_expected_;
    }

    if (claiming) {
      // Claims first: the outcomes due ride in the claim's transaction.
      wake_for_new_rows();
      answer_claims();
    }
    write_outcomes(false);
    write_quotas(false);
    ping_if_idle();
    publish_wal_counters();
    if (claiming) {
      const bool shards_idle = counters_.in_flight.load(std::memory_order_relaxed) == 0 &&
                               counters_.buffered.load(std::memory_order_relaxed) == 0;
      const auto backlog = backlog_estimate_.at(finished_rows());
      counters_.backlog.store(backlog, std::memory_order_relaxed);
      const auto due = cadence_.due(steady::now(), backlog, shards_idle);
      if (due.reload_subscribers) reload_subscribers(false);
      if (due.renew_ownership) renew_ownership();
      if (due.count_backlog) check_drained();
    } else {
      // Claiming stopped: the other drains may take the subscribers now, while this one's
      // attempts in flight finish (their rows stay fenced by their row leases).
      if (!ownership_released_) release_ownership();
    }
    if (!claiming && !pending_claims_.empty()) {
      // Claiming stopped: answer with nothing so that shards do not wait for rows.
      for (auto& [shard, demand] : pending_claims_) {
        shards_[static_cast<std::size_t>(shard)]->on_claimed({std::move(demand), {}});
      }
      pending_claims_.clear();
    }

    if (finish_expected >= 0 && unspent_batches_ >= finish_expected) {
      write_outcomes(true);
      write_quotas(true);
      if (!pending_unspent_.empty()) {
        try {
          db_->give_back_tokens(pending_unspent_, proto::unix_now());
          pending_unspent_.clear();
        } catch (const storage::error& error) {
          // Kept by nobody: the partner simply gets fewer requests for a moment.
          log_error(std::string("could not give unspent tokens back: ") + error.what());
          pending_unspent_.clear();
        }
      }
      if (pending_outcomes_.empty()) {
        try {
          remaining_ = db_->count_outstanding(proto::unix_now(), config_.subscribers);
        } catch (const storage::error&) {
          remaining_ = -1;
        }
        if (!ownership_released_) release_ownership();
        publish_wal_counters();
        rescue_report_ = db_->rescue_lost_log();
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
      wake_.wait_for(lock, config_.storage.error_backoff,
                     [this] { return lock_wait_.give_up.load(); });
    }
  }
}

void storage_worker::renew_ownership(bool initial) {
  cadence_.renewed(steady::now());
  storage::ownership_change change;
  try {
    change = db_->renew_ownership(proto::unix_now());
  } catch (const storage::error& error) {
    if (stop_for_fault(error)) return;
    // Claims keep their fence: once the last renewal's heartbeat runs out this drain claims
    // nothing, and the other drainers may take its subscribers.
    counters_.add(counters_.storage_errors);
    log_warn(std::string("renewing ownership leases failed, will retry: ") + error.what());
    return;
  }
  cadence_.handoff_awaited(change.awaited > 0);
  counters_.owned_subscribers.store(static_cast<std::int64_t>(db_->owned_count(proto::unix_now())),
                                    std::memory_order_relaxed);
  if (!change.lost.empty()) {
    log_warn("lost ownership of " + std::to_string(change.lost.size()) + " subscribers (first " +
             std::to_string(change.lost.front()) +
             "): another drainer took them over after this drain missed its renewals");
  }
  if (!initial && !change.taken.empty()) tell_owner_change(change.taken, true);
  auto disowned = std::move(change.released);
  disowned.insert(disowned.end(), change.lost.begin(), change.lost.end());
  if (!disowned.empty()) tell_owner_change(disowned, false);
}

void storage_worker::tell_owner_change(const std::vector<std::int64_t>& ids, bool taken) {
  auto per_shard = split_by_shard(ids);
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    if (per_shard[i].empty()) continue;
    if (taken) {
      shards_[i]->on_taken(std::move(per_shard[i]));
    } else {
      shards_[i]->on_disowned(std::move(per_shard[i]));
    }
  }
}

void storage_worker::release_ownership() {
  ownership_released_ = true;
  try {
    db_->release_ownership();
    counters_.owned_subscribers.store(0, std::memory_order_relaxed);
  } catch (const storage::error& error) {
    // Left to expire: the other drainers take over once the heartbeat runs out.
    log_warn(std::string("could not release ownership leases at the stop: ") + error.what());
  }
}

void storage_worker::publish_wal_counters() {
  const auto written = db_->counters();
  counters_.wal_commits.store(written.commits, std::memory_order_relaxed);
  counters_.wal_frames.store(written.frames, std::memory_order_relaxed);
}

void storage_worker::give_up_writing() {
  unwritten_ = static_cast<std::int64_t>(pending_outcomes_.size());
  if (unwritten_ > 0) {
    double lease_ends = 0;
    for (const auto& outcome : pending_outcomes_) lease_ends = std::max(lease_ends, outcome.lease);
    const auto wait = std::max(0.0, lease_ends - proto::unix_now());
    log_error("stopped before the database took the outcomes of " + std::to_string(unwritten_) +
              " rows; their leases end within " + std::to_string(static_cast<long long>(wait + 1)) +
              " s and they will be sent again then (at-least-once)");
  }
  publish_wal_counters();
  rescue_report_ = db_->rescue_lost_log();
  finished_.store(true);
}

void storage_worker::write_quotas(bool force) {
  if (pending_quotas_.empty()) return;
  const auto now = steady::now();
  // For an operator's eyes, not for the drain: once a second is fresh enough, and costs one
  // short transaction however many partners announce.
  if (!force && (now - last_quota_write_ < std::chrono::seconds(1) || now < retry_storage_after_)) {
    return;
  }
  last_quota_write_ = now;
  // The latest per subscriber: shards hand them over in the order they were seen.
  std::stable_sort(pending_quotas_.begin(), pending_quotas_.end(),
                   [](const auto& a, const auto& b) { return a.subscriber_id < b.subscriber_id; });
  std::vector<storage::partner_quota_row> latest;
  for (std::size_t i = 0; i < pending_quotas_.size(); ++i) {
    const bool last_of_its_subscriber =
        i + 1 == pending_quotas_.size() ||
        pending_quotas_[i + 1].subscriber_id != pending_quotas_[i].subscriber_id;
    if (last_of_its_subscriber) latest.push_back(std::move(pending_quotas_[i]));
  }
  pending_quotas_.clear();
  try {
    db_->record_partner_quotas(latest);
  } catch (const storage::error& error) {
    // Kept for the next try, unless a newer announcement replaces it first.
    counters_.add(counters_.storage_errors);
    log_warn(std::string("could not record the partners' announced quotas, will retry: ") +
             error.what());
    if (!force) pending_quotas_ = std::move(latest);
  }
}

void storage_worker::write_outcomes(bool force) {
  const auto now = steady::now();
  if (now < retry_storage_after_) return;
  if (!outcomes_due_now(now, force)) return;
  const std::size_t full = config_.storage.outcome_commits.rows;
  std::size_t limit = full;
  std::size_t offset = 0;              // outcomes committed (or settled) so far
  std::vector<storage::outcome> held;  // rows another session holds locked: a later batch
  auto deactivate = std::exchange(pending_deactivate_, {});
  try {
    while (offset < pending_outcomes_.size() || !deactivate.empty()) {
      const auto count = std::min(limit, pending_outcomes_.size() - offset);
      const std::span<const storage::outcome> batch(pending_outcomes_.data() + offset, count);
      const auto started = steady::now();
      try {
        const auto report = db_->write_outcomes(batch, deactivate);
        note_written(report, count, steady::now() - started);
        keep_held(report, batch, held);
        deactivate.clear();
        offset += count;
        if (limit == 0) limit = full;
      } catch (const storage::error& error) {
        if (error.what_kind() != storage::error::kind::row_rejected) throw;
        // A row's fault stays the row's: halve the batch until the refused row is alone.
        if (!deactivate.empty() && count > 0) {
          limit = 0;  // the deactivations alone first
        } else if (count == 0) {
          log_error("the database refused to deactivate subscribers after 410 Gone (" +
                    std::string(error.what()) + "); they stay active");
          deactivate.clear();
          limit = full;
        } else if (count == 1) {
          settle_refused(pending_outcomes_[offset], error);
          ++offset;
          limit = full;
        } else {
          limit = count / 2;
        }
      }
    }
    pending_outcomes_ = std::move(held);
    last_commit_ = now;
  } catch (const storage::error& error) {
    // Batches committed before the failure are not written again: their fences would fail as
    // lost leases and their attempts would be recorded twice.
    pending_outcomes_.erase(pending_outcomes_.begin(),
                            pending_outcomes_.begin() + static_cast<std::ptrdiff_t>(offset));
    pending_outcomes_.insert(pending_outcomes_.end(), held.begin(), held.end());
    pending_deactivate_.insert(pending_deactivate_.end(), deactivate.begin(), deactivate.end());
    if (offset > 0) last_commit_ = now;
    if (stop_for_fault(error)) return;
    counters_.add(counters_.storage_errors);
    retry_storage_after_ = now + config_.storage.error_backoff;
    log_error(std::string("writing outcomes failed, will retry and claim nothing meanwhile: ") +
              error.what());
  }
}

void storage_worker::keep_held(const storage::write_report& report,
                               std::span<const storage::outcome> batch,
                               std::vector<storage::outcome>& held) {
  pending_deactivate_.insert(pending_deactivate_.end(), report.held_subscribers.begin(),
                             report.held_subscribers.end());
  if (report.held_rows.empty()) {
    held_rows_warning_.clear();
    return;
  }
  const std::unordered_set<std::int64_t> ids(report.held_rows.begin(), report.held_rows.end());
  for (const auto& outcome : batch) {
    if (ids.contains(outcome.delivery_id)) held.push_back(outcome);
  }
  if (held_rows_warning_.due(steady::now())) {
    log_warn(std::to_string(report.held_rows.size()) + " rows (first id " +
             std::to_string(report.held_rows.front()) +
             ") are locked by another database session: their outcomes wait for it to end its "
             "transaction; the other rows go on");
  }
}

void storage_worker::settle_refused(const storage::outcome& refused, const storage::error& why) {
  counters_.add(counters_.refused_outcomes);
  std::string reason = std::string("the database refused this row's outcome: ") + why.what();
  constexpr std::size_t reason_limit = 300;
  if (reason.size() > reason_limit) reason = reason.substr(0, reason_limit) + "...";
  if (refused.kind != storage::outcome_kind::dead &&
      refused.kind != storage::outcome_kind::release) {
    auto dead = refused;
    dead.kind = storage::outcome_kind::dead;
    dead.last_error = reason;
    try {
      const storage::outcome one[] = {dead};
      const auto report = db_->write_outcomes(one, {});
      note_written(report, 1, {});
      if (report.applied == 1) {
        counters_.add(counters_.dead);
        log_error("row " + std::to_string(refused.delivery_id) + ": " + reason +
                  "; dead-lettered with that reason (`surge dead list`)");
        return;
      }
    } catch (const storage::error& again) {
      if (again.what_kind() != storage::error::kind::row_rejected) throw;
    }
  }
  // Sending it again when its lease ends would only be refused again, and a partner that
  // answered 2xx would get it once per lease: it stays out of this drain's claims.
  quarantined_.emplace(refused.delivery_id, reason);
  log_error("row " + std::to_string(refused.delivery_id) + ": " + reason +
            "; even a dead-letter was refused, so the row is quarantined: this drain never "
            "claims or sends it again, and it stays in the queue as it was (its lease ends on "
            "its own)");
}

bool storage_worker::outcomes_due_now(steady::time_point now, bool force) const {
  const bool frees_key = std::any_of(pending_outcomes_.begin(), pending_outcomes_.end(),
                                     [](const storage::outcome& o) { return o.frees_key; });
  return outcomes_due(config_.storage.outcome_commits, pending_outcomes_.size(),
                      !pending_deactivate_.empty(), now - last_commit_, force, frees_key);
}

void storage_worker::note_written(const storage::write_report& report, std::size_t rows,
                                  steady::duration took) {
  metrics_.commit_duration.observe(std::chrono::duration<double>(took).count());
  metrics_.commit_rows.observe(static_cast<double>(rows));
  metrics_.beat_storage();
  for (const auto& stopped : report.keys_stopped) {
    counters_.add(counters_.keys_stopped);
    log_warn("subscriber " + std::to_string(stopped.subscriber_id) + ": key " + stopped.key +
             " stopped: delivery " + std::to_string(stopped.delivery_id) +
             " died; its later rows wait for `surge dead replay` or `surge subscriber "
             "resume-key`");
  }
  if (report.lost_leases.empty()) return;
  counters_.add(counters_.lost_leases, static_cast<std::int64_t>(report.lost_leases.size()));
  if (!report.deleted.empty()) {
    log_warn(std::to_string(report.deleted.size()) + " rows (first id " +
             std::to_string(report.deleted.front()) +
             ") were deleted from the queue while they were in flight; their outcomes had "
             "nowhere to go");
  }
  const auto taken = report.lost_leases.size() - report.deleted.size();
  if (taken == 0) return;
  const auto first =
      std::find_if(report.lost_leases.begin(), report.lost_leases.end(), [&](std::int64_t id) {
        return std::find(report.deleted.begin(), report.deleted.end(), id) == report.deleted.end();
      });
  log_warn("lost the lease of " + std::to_string(taken) + " rows (first id " +
           std::to_string(*first) + "): another drainer took them after the lease expired");
}

void storage_worker::answer_claims() {
  if (pending_claims_.empty()) return;
  // While the database refuses writes, claiming more would only grow what is held in memory.
  if (steady::now() < retry_storage_after_) return;
  // More outcomes than one batch go first in batches of their own, so the cycle stays short.
  if (pending_outcomes_.size() > config_.storage.outcome_commits.rows) {
    write_outcomes(true);
    if (steady::now() < retry_storage_after_ || queue_lost_) return;
  }
  std::vector<storage::subscriber_demand> all;
  for (const auto& [shard, demand] : pending_claims_)
    all.insert(all.end(), demand.begin(), demand.end());
  cap_claim(all);
  std::vector<storage::claimed_row> rows;
  std::vector<storage::token_grant> granted;
  std::vector<std::int64_t> more_due;
  for (int tries = 0; tries < 2; ++tries) {
    const auto now = steady::now();
    // Outcomes due now ride with the claim: one transaction, and a page that holds finished rows
    // and the next ones is written once (storage/cycle.hpp). The others wait for a later cycle.
    const bool with_outcomes = outcomes_due_now(now, false);
    const std::span<const storage::outcome> outcomes =
        with_outcomes ? std::span<const storage::outcome>(pending_outcomes_)
                      : std::span<const storage::outcome>();
    const std::span<const std::int64_t> deactivate =
        with_outcomes ? std::span<const std::int64_t>(pending_deactivate_)
                      : std::span<const std::int64_t>();
    try {
      const double lease_seconds = std::chrono::duration<double>(config_.storage.lease).count();
      auto result =
          db_->write_and_claim(outcomes, deactivate, all, proto::unix_now(), lease_seconds,
                               static_cast<std::int64_t>(std::min<std::size_t>(
                                   config_.scheduler.max_payload_bytes, INT64_MAX)));
      const auto took = steady::now() - now;
      if (with_outcomes) {
        note_written(result.written, pending_outcomes_.size(), took);
        std::vector<storage::outcome> held;
        pending_deactivate_.clear();
        keep_held(result.written, pending_outcomes_, held);
        pending_outcomes_ = std::move(held);
        last_commit_ = now;
      }
      note_held_subscribers(result.held_subscribers);
      cadence_.claim_answered();
      // Claims that fit within the statement timeout again may grow back.
      if (claim_rows_cap_ != SIZE_MAX) {
        claim_rows_cap_ =
            claim_rows_cap_ >= (std::size_t{1} << 20) ? SIZE_MAX : claim_rows_cap_ * 2;
      }
      rows = std::move(result.claimed);
      if (!quarantined_.empty()) {
        std::erase_if(rows, [this](const auto& row) { return quarantined_.contains(row.id); });
      }
      rows_handed_out_ += static_cast<std::int64_t>(rows.size());
      granted = std::move(result.granted);
      more_due = std::move(result.more_due);
      metrics_.claim_duration.observe(std::chrono::duration<double>(took).count());
      metrics_.claim_rows.observe(static_cast<double>(rows.size()));
      metrics_.beat_storage();
      break;
    } catch (const storage::error& error) {
      rows.clear();
      if (stop_for_fault(error)) break;
      if (error.what_kind() == storage::error::kind::row_rejected && with_outcomes) {
        // One row's outcome was refused and the whole cycle rolled back: the outcomes go on
        // their own, where the refused row is found and settled, then the claim again.
        write_outcomes(true);
        if (steady::now() < retry_storage_after_ || queue_lost_) break;
        continue;
      }
      counters_.add(counters_.storage_errors);
      if (error.what_kind() == storage::error::kind::timed_out) {
        // Cancelled by a statement timeout (the role's, or ours on a slow server): a claim half
        // the size goes next, at once.
        std::size_t asked = 0;
        for (const auto& entry : all) asked += static_cast<std::size_t>(std::max(entry.rows, 0));
        claim_rows_cap_ = std::max<std::size_t>(1, std::min(claim_rows_cap_, asked) / 2);
        log_warn(std::string("a claim was cancelled by the statement timeout; claiming at most ") +
                 std::to_string(claim_rows_cap_) +
                 " rows at a time until they fit: " + error.what());
        break;
      }
      retry_storage_after_ = now + config_.storage.error_backoff;
      // The outcomes stay pending: the whole transaction rolled back.
      log_error(!with_outcomes
                    ? std::string("claiming failed, will retry: ") + error.what()
                    : std::string("writing outcomes failed (with a claim), will retry and claim "
                                  "nothing meanwhile: ") +
                          error.what());
      break;
    }
  }
  const auto shard_count = static_cast<std::int64_t>(shards_.size());
  std::vector<claim_reply> replies(shards_.size());
  for (auto& [shard, demand] : pending_claims_) {
    replies[static_cast<std::size_t>(shard)].asked = std::move(demand);
  }
  for (auto& row : rows) {
    replies[static_cast<std::size_t>(row.subscriber_id % shard_count)].rows.push_back(
        std::move(row));
  }
  for (const auto& grant : granted) {
    // Said once per drain and subscriber: a writer that keeps writing such buckets would
    // otherwise fill the log with one line per cycle.
    if (!grant.repaired.empty() && bucket_repairs_said_.insert(grant.subscriber_id).second) {
      log_warn("subscriber " + std::to_string(grant.subscriber_id) +
               ": its persisted token bucket no drainer could have written was repaired (" +
               grant.repaired +
               "): read as stamped now and written back, so it sends again (a host's clock "
               "ahead, or another program's bad write)");
    }
    replies[static_cast<std::size_t>(grant.subscriber_id % shard_count)].granted.push_back(grant);
  }
  for (const auto id : more_due) {
    replies[static_cast<std::size_t>(id % shard_count)].more_due.push_back(id);
  }
  for (auto& [shard, demand] : pending_claims_) {
    (void)demand;
    shards_[static_cast<std::size_t>(shard)]->on_claimed(
        std::move(replies[static_cast<std::size_t>(shard)]));
  }
  pending_claims_.clear();
}

void storage_worker::cap_claim(std::vector<storage::subscriber_demand>& demand) const {
  if (claim_rows_cap_ == SIZE_MAX) return;
  std::size_t left = claim_rows_cap_;
  for (auto& entry : demand) {
    const auto rows = static_cast<std::size_t>(std::max(entry.rows, 0));
    entry.rows = static_cast<int>(std::min(rows, left));
    left -= static_cast<std::size_t>(entry.rows);
  }
}

void storage_worker::note_held_subscribers(const std::vector<std::int64_t>& held) {
  if (held.empty()) {
    held_subscribers_warning_.clear();
    return;
  }
  if (!held_subscribers_warning_.due(steady::now())) return;
  std::string list;
  for (std::size_t i = 0; i < held.size() && i < 10; ++i) {
    list += (i ? "," : "") + std::to_string(held[i]);
  }
  log_warn("subscriber" + std::string(held.size() == 1 ? " " : "s ") + list +
           (held.size() > 10 ? ",..." : "") +
           ": the subscriber row is locked by another database session (an open transaction), "
           "so its bucket cannot be spent and nothing is sent to it until that ends; the other "
           "subscribers go on");
}

bool storage_worker::stop_for_fault(const storage::error& failure) {
  if (!storage::is_fatal(failure)) return false;
  stop_with_failure(storage::with_remedy(failure, config_.storage.db_path));
  return true;
}

void storage_worker::stop_with_failure(std::string why) {
  if (queue_lost_) return;
  queue_lost_ = true;
  log_error(why + "; stopped claiming");
  {
    std::lock_guard lock(mutex_);
    claiming_ = false;
  }
  if (fatal_callback_) fatal_callback_(std::move(why));
}

}  // namespace surge::engine
