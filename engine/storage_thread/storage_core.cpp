#include "engine/storage_thread/storage_core.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace surge::engine {

storage_core_config storage_core_config::of(const drain_config& drain) {
  storage_core_config config;
  config.storage = drain.storage;
  config.max_payload_bytes = static_cast<std::int64_t>(
      std::min<std::size_t>(drain.scheduler.max_payload_bytes, INT64_MAX));
  config.until_drained = drain.until_drained;
  config.until_drained_retry_wait = drain.until_drained_retry_wait;
  return config;
}

storage_core::storage_core(const storage_core_config& config, int shards, drain_counters& counters,
                           core_log& log)
    : config_(config),
      claim_(static_cast<std::size_t>(std::max(shards, 0))),
      counters_(counters),
      report_(counters, log, config.repeated_warning_interval),
      pending_(config.storage.outcome_commits),
      quotas_(config.quota_write_interval),
      reads_(config) {}

void storage_core::begin(clock::time_point now) {
  reads_.begin(now);
  ownership_.renewing(true);
  // Before the first claim: a drain alone on the queue owns every subscriber from the start.
  queued_.emplace_back(storage_do::reload_subscribers{.initial = true}, awaiting::reload);
  queued_.emplace_back(storage_do::renew_ownership{}, awaiting::renew);
  next_wake_ = now;
}

void storage_core::claims_asked(int shard, std::vector<storage::subscriber_demand> demand) {
  claim_.asked(shard, std::move(demand));
}

void storage_core::outcomes_submitted(std::vector<storage::outcome> outcomes,
                                      std::vector<std::int64_t> deactivate) {
  if (!outcomes.empty()) {
    counters_.add(counters_.outcomes_in_transit, -static_cast<std::int64_t>(outcomes.size()));
  }
  pending_.submitted(std::move(outcomes), std::move(deactivate));
}

void storage_core::tokens_returned(std::vector<storage::unspent_tokens> tokens) {
  end_.tokens_returned(std::move(tokens));
}

void storage_core::quotas_announced(std::vector<storage::partner_quota_row> rows) {
  quotas_.announced(std::move(rows));
}

void storage_core::tick(clock::time_point now) {
  if (end_.ended()) return;
  if (phase_ == phase::idle && awaiting_ == awaiting::nothing) phase_ = phase::new_rows;
  next_wake_ = now + config_.storage.wake_interval;
}

std::optional<storage_action> storage_core::next_action(clock::time_point now) {
  if (!outbox_.empty()) {
    auto action = std::move(outbox_.front());
    outbox_.pop_front();
    return action;
  }
  if (awaiting_ != awaiting::nothing || end_.ended()) return std::nullopt;
  return step(now);
}

std::optional<storage_action> storage_core::step(clock::time_point now) {
  while (true) {
    if (!outbox_.empty()) {
      auto action = std::move(outbox_.front());
      outbox_.pop_front();
      return action;
    }
    if (!queued_.empty()) {
      auto [action, awaited] = std::move(queued_.front());
      queued_.pop_front();
      awaiting_ = awaited;
      return std::move(action);
    }
    if (pending_.running()) {
      if (auto batch = pending_.next_batch()) {
        awaiting_ = awaiting::outcomes;
        return storage_do::write_outcomes{batch->outcomes, batch->deactivate};
      }
      continue;
    }
    switch (phase_) {
      case phase::idle: return std::nullopt;
      case phase::new_rows:
        phase_ = phase::claims;
        if (claiming_ && reads_.new_rows_check(now)) return storage_do::check_new_rows{};
        break;
      case phase::claims:
        if (auto action = claims_step(now)) return action;
        break;
      case phase::outcomes:
        phase_ = phase::quotas;
        start_outcomes(now, false);
        break;
      case phase::quotas: {
        phase_ = phase::check;
        // For an operator's eyes, not for the drain: written at most once per interval.
        if (!quotas_.due(now) || now < retry_storage_after_) break;
        awaiting_ = awaiting::quotas;
        return storage_do::write_quotas{quotas_.take(now, false)};
      }
      case phase::check:
        phase_ = phase::periodic;
        reads_.start_round(now, claiming_, finished_rows(), shards_idle());
        if (claiming_) counters_.backlog.store(reads_.round_estimate(), std::memory_order_relaxed);
        break;
      case phase::periodic:
        if (auto action = periodic_step(now)) return action;
        break;
      case phase::stopped:
        phase_ = phase::finishing;
        // Claiming stopped: the other drains may take the subscribers now, while this one's
        // attempts in flight finish (their rows stay fenced by their row leases).
        if (!claiming_ && ownership_.release()) {
          awaiting_ = awaiting::release;
          return storage_do::release_ownership{};
        }
        break;
      case phase::finishing:
        if (!claiming_ && claim_.waiting()) {
          for (auto& answer : claim_.answer_stopped()) outbox_.emplace_back(std::move(answer));
          break;
        }
        if (auto action = finish_step(now)) return action;
        break;
    }
  }
}

std::optional<storage_action> storage_core::claims_step(clock::time_point now) {
  switch (claim_.step({.claiming = claiming_,
                       .backing_off = now < retry_storage_after_,
                       .queue_lost = queue_lost_,
                       .outcomes_over_one_batch = pending_.over_one_batch()})) {
    case claim_round::next::nothing: phase_ = phase::outcomes; return std::nullopt;
    case claim_round::next::write_outcomes_first: start_outcomes(now, true); return std::nullopt;
    case claim_round::next::answer_empty: answer_claims({}, {}, {}); return std::nullopt;
    case claim_round::next::run_cycle: awaiting_ = awaiting::cycle; return cycle_action(now);
  }
  return std::nullopt;
}

storage_do::run_cycle storage_core::cycle_action(clock::time_point now) {
  // Outcomes due now ride with the claim: one transaction, and a page that holds finished rows
  // and the next ones is written once (storage/cycle.hpp). The others wait for a later cycle.
  claim_.cycle_started(now, pending_.due(now, false));
  storage_do::run_cycle cycle{.outcomes = {},
                              .deactivate = {},
                              .demand = claim_.demand(),
                              .lease = config_.storage.lease,
                              .max_payload_bytes = config_.max_payload_bytes};
  if (claim_.with_outcomes()) {
    cycle.outcomes = pending_.outcomes();
    cycle.deactivate = pending_.deactivate();
  }
  return cycle;
}

void storage_core::cycle_done(clock::time_point now, storage::cycle_result result) {
  awaiting_ = awaiting::nothing;
  if (claim_.with_outcomes()) {
    report_.written(result.written);
    if (pending_.written_with_claim(result.written, claim_.started())) {
      report_.rows_held(now, result.written);
    }
  }
  report_.subscribers_held(now, result.held_subscribers);
  claim_.fitted();
  auto rows = std::move(result.claimed);
  refused_.drop_from(rows);
  reads_.claim_answered(rows.size());
  answer_claims(std::move(rows), std::move(result.granted), std::move(result.more_due));
}

void storage_core::cycle_failed(clock::time_point now, const storage::error& error) {
  if (stop_for_fault(error)) {
    answer_claims({}, {}, {});
    return;
  }
  if (error.what_kind() == storage::error::kind::row_rejected && claim_.with_outcomes()) {
    // One row's outcome was refused and the whole cycle rolled back: the outcomes go on their
    // own, where the refused row is found and settled, then the claim again.
    start_outcomes(now, true);
    return;
  }
  counters_.add(counters_.storage_errors);
  if (error.what_kind() == storage::error::kind::timed_out) {
    // A smaller claim goes next, at once.
    claim_.timed_out();
    say(log_level::warn,
        std::string("a claim was cancelled by the statement timeout; claiming at most ") +
            std::to_string(claim_.most_rows()) + " rows at a time until they fit: " + error.what());
  } else {
    retry_storage_after_ = claim_.started() + config_.storage.error_backoff;
    // The outcomes stay pending: the whole transaction rolled back.
    say(log_level::error,
        !claim_.with_outcomes()
            ? std::string("claiming failed, will retry: ") + error.what()
            : std::string("writing outcomes failed (with a claim), will retry and claim nothing "
                          "meanwhile: ") +
                  error.what());
  }
  answer_claims({}, {}, {});
}

void storage_core::answer_claims(std::vector<storage::claimed_row> rows,
                                 std::vector<storage::token_grant> granted,
                                 std::vector<std::int64_t> more_due) {
  report_.granted(granted);
  for (auto& answer : claim_.answer(std::move(rows), std::move(granted), std::move(more_due))) {
    outbox_.emplace_back(std::move(answer));
  }
  phase_ = phase::outcomes;
}

bool storage_core::start_outcomes(clock::time_point now, bool force) {
  if (now < retry_storage_after_) return false;
  if (!pending_.due(now, force)) return false;
  pending_.start_run(now);
  return true;
}

void storage_core::outcomes_written(clock::time_point now, const storage::write_report& report) {
  awaiting_ = awaiting::nothing;
  auto& run = pending_.run();
  report_.written(report);
  if (const auto* dead = run.settling()) {
    if (report.applied == 1) {
      report_.dead_lettered(dead->delivery_id, run.settle_reason());
    } else {
      quarantine(dead->delivery_id, run.settle_reason());
    }
    run.settled();
    return;
  }
  if (pending_.batch_written(report)) report_.rows_held(now, report);
}

void storage_core::quarantine(std::int64_t delivery_id, const std::string& reason) {
  refused_.quarantine(delivery_id, reason);
  report_.quarantined(delivery_id, reason);
}

void storage_core::outcome_run_failed(clock::time_point now, const storage::error& error) {
  (void)now;
  const auto began = pending_.run_failed();
  if (stop_for_fault(error)) return;
  retry_storage_after_ = began + config_.storage.error_backoff;
  report_.failure(log_level::error,
                  "writing outcomes failed, will retry and claim nothing meanwhile: ", error);
}

void storage_core::outcomes_failed(clock::time_point now, const storage::error& error) {
  auto& run = pending_.run();
  if (error.what_kind() != storage::error::kind::row_rejected) {
    outcome_run_failed(now, error);
    return;
  }
  if (const auto* dead = run.settling()) {
    quarantine(dead->delivery_id, run.settle_reason());
    run.settled();
    return;
  }
  // A row's fault stays the row's: the batch is halved until the refused row is alone.
  auto refusal = pending_.refused(error.what());
  using kind = outcome_batches::refusal::kind;
  switch (refusal.what) {
    case kind::smaller_batch: return;
    case kind::deactivation_refused:
      say(log_level::error, "the database refused to deactivate subscribers after 410 Gone (" +
                                std::string(error.what()) + "); they stay active");
      return;
    case kind::dead_letter: report_.refused_outcome(); return;
    case kind::quarantine:
      report_.refused_outcome();
      quarantine(refusal.delivery_id, refusal.reason);
      return;
  }
}

void storage_core::failed(clock::time_point now, const storage::error& error) {
  const auto was = std::exchange(awaiting_, awaiting::nothing);
  switch (was) {
    case awaiting::nothing: return;
    case awaiting::cycle: cycle_failed(now, error); return;
    case awaiting::outcomes: outcomes_failed(now, error); return;
    case awaiting::quotas:
      // Kept for the next try, unless a newer announcement replaces it first.
      report_.failure(log_level::warn,
                      "could not record the partners' announced quotas, will retry: ", error);
      quotas_.failed();
      return;
    case awaiting::check:
      storage_failure(log_level::error, "database check failed: ", error);
      return;
    case awaiting::reload:
      reads_.reload_failed();
      storage_failure(log_level::error, "re-reading subscribers failed: ", error);
      return;
    case awaiting::sweep:
      if (reads_.sweep_failed()) {
        storage_failure(log_level::error, "checking the backlog failed: ", error);
      } else {
        storage_failure(log_level::error, "re-reading subscribers failed: ", error);
      }
      return;
    case awaiting::renew:
      // Claims keep their fence: once the last renewal's heartbeat runs out this drain claims
      // nothing, and the other drainers may take its subscribers.
      storage_failure(log_level::warn, "renewing ownership leases failed, will retry: ", error);
      return;
    case awaiting::release:
      // Left to expire: the other drainers take over once the heartbeat runs out.
      say(log_level::warn,
          std::string("could not release ownership leases at the stop: ") + error.what());
      return;
    case awaiting::count:
      reads_.count_failed();
      storage_failure(log_level::error, "checking the backlog failed: ", error);
      return;
    case awaiting::remaining: end_.remaining_counted(-1); return;
    case awaiting::tokens:
      // Kept by nobody: the partner simply gets fewer requests for a moment.
      say(log_level::error, std::string("could not give unspent tokens back: ") + error.what());
      return;
  }
}

void storage_core::done(clock::time_point now) {
  (void)now;
  const auto was = std::exchange(awaiting_, awaiting::nothing);
  if (was == awaiting::release) counters_.owned_subscribers.store(0, std::memory_order_relaxed);
  if (was == awaiting::quotas) quotas_.written();
}

void storage_core::storage_failure(log_level level, const std::string& what,
                                   const storage::error& error) {
  if (stop_for_fault(error)) return;
  report_.failure(level, what, error);
}

void storage_core::subscribers_loaded(clock::time_point now,
                                      std::vector<std::pair<std::int64_t, bool>> sendable) {
  awaiting_ = awaiting::nothing;
  sendable_ = std::move(sendable);
  if (reads_.reloaded(now)) {
    queued_.emplace_back(sweep(), awaiting::sweep);
  }
}

void storage_core::ownership_renewed(clock::time_point now, const storage::ownership_change& change,
                                     std::int64_t owned) {
  (void)now;
  awaiting_ = awaiting::nothing;
  reads_.renewed(change.awaited > 0);
  counters_.owned_subscribers.store(owned, std::memory_order_relaxed);
  report_.ownership_lost(change.lost);
  for (auto& tell : ownership_.renewed(change)) outbox_.emplace_back(std::move(tell));
}

storage_do::sweep_stuck_rows storage_core::sweep() const {
  // A lease longer than ours or the other drainer's 30 s, by a generous margin, is no lease:
  // text, a unit mix-up or a typo in the column, which would hold its row for ever.
  const auto longest =
      std::max<std::chrono::milliseconds>(config_.storage.lease, std::chrono::seconds(30));
  return {.lease_horizon = longest + config_.storage.max_lease_overrun};
}

std::optional<storage_action> storage_core::periodic_step(clock::time_point now) {
  using read = periodic_reads::read;
  switch (reads_.next(now, finished_rows(), !pending_.empty() || claim_.waiting())) {
    case read::check_database:
      awaiting_ = awaiting::check;
      return storage_do::check_database{.look_for_file = !queue_lost_};
    case read::reload_subscribers:
      awaiting_ = awaiting::reload;
      return storage_do::reload_subscribers{};
    case read::renew_ownership:
      ownership_.renewing(false);
      awaiting_ = awaiting::renew;
      return storage_do::renew_ownership{};
    case read::write_outcomes_first: start_outcomes(now, true); return std::nullopt;
    case read::count_backlog: awaiting_ = awaiting::count; return storage_do::count_backlog{};
    case read::done: phase_ = phase::stopped; return std::nullopt;
  }
  return std::nullopt;
}

void storage_core::backlog_counted(clock::time_point now, std::int64_t outstanding,
                                   std::optional<double> earliest_in, clock::duration took) {
  awaiting_ = awaiting::nothing;
  outstanding = refused_.finishable(outstanding);
  const auto then =
      reads_.counted(now, outstanding, earliest_in, took, shards_idle(), finished_rows());
  counters_.backlog.store(outstanding, std::memory_order_relaxed);
  if (then == backlog_check::then::sweep) {
    queued_.emplace_back(sweep(), awaiting::sweep);
  } else if (then == backlog_check::then::drained) {
    outbox_.emplace_back(storage_do::drained{});
  }
}

void storage_core::swept(clock::time_point now, std::int64_t orphans,
                         const storage::malformed_rows& found) {
  (void)now;
  awaiting_ = awaiting::nothing;
  report_.swept(orphans, found);
  if (reads_.swept()) {
    // The count again, without the rows just dead-lettered.
    queued_.emplace_back(storage_do::count_backlog{}, awaiting::count);
  }
}

std::optional<storage_action> storage_core::finish_step(clock::time_point now) {
  switch (end_.next(!pending_.empty())) {
    case drain_end::step::wait:
      // The round is over: the loop sleeps until an event or the next wake.
      phase_ = phase::idle;
      next_wake_ = now + config_.storage.wake_interval;
      return std::nullopt;
    case drain_end::step::write_outcomes: start_outcomes(now, true); return std::nullopt;
    case drain_end::step::write_quotas:
      // At the end, whatever the backoff.
      if (!quotas_.any()) return std::nullopt;
      awaiting_ = awaiting::quotas;
      return storage_do::write_quotas{quotas_.take(now, true)};
    case drain_end::step::give_back_tokens: {
      const auto tokens = end_.tokens_to_give_back();
      if (tokens.empty()) return std::nullopt;
      awaiting_ = awaiting::tokens;
      return storage_do::give_back_tokens{tokens};
    }
    case drain_end::step::count_remaining:
      awaiting_ = awaiting::remaining;
      return storage_do::count_remaining{};
    case drain_end::step::retry_later:
      phase_ = phase::idle;
      next_wake_ = now + config_.storage.error_backoff;
      return std::nullopt;
    case drain_end::step::release_ownership:
      if (!ownership_.release()) return std::nullopt;
      awaiting_ = awaiting::release;
      return storage_do::release_ownership{};
    case drain_end::step::give_up: {
      phase_ = phase::idle;
      storage_do::finish report;
      report.unwritten = static_cast<std::int64_t>(pending_.size());
      report.last_lease = pending_.last_lease();
      return report;
    }
    case drain_end::step::report: break;
  }
  phase_ = phase::idle;
  return storage_do::finish{.remaining = end_.remaining(), .unwritten = 0, .last_lease = 0};
}

void storage_core::remaining_counted(std::int64_t remaining) {
  awaiting_ = awaiting::nothing;
  end_.remaining_counted(remaining);
}

void storage_core::queue_lost(std::string why) {
  // SQLite keeps writing to a file that was deleted or renamed over: outcomes would land in a
  // file nobody reads and the new file's rows would never be claimed.
  stop_with_failure(std::move(why));
}

bool storage_core::stop_for_fault(const storage::error& failure) {
  if (!storage::is_fatal(failure)) return false;
  stop_with_failure(storage::with_remedy(failure, config_.storage.db_path));
  return true;
}

void storage_core::stop_with_failure(std::string why) {
  if (queue_lost_) return;
  queue_lost_ = true;
  claiming_ = false;
  say(log_level::error, why + "; stopped claiming");
  outbox_.emplace_back(storage_do::stop_drain{std::move(why)});
}

std::int64_t storage_core::finished_rows() const {
  return counters_.delivered.load(std::memory_order_relaxed) +
         counters_.dead.load(std::memory_order_relaxed) +
         counters_.coalesced.load(std::memory_order_relaxed);
}

bool storage_core::shards_idle() const {
  // In the order rows move through them (drain_counters): a row that moved on between two reads
  // is seen where it went.
  return counters_.buffered.load(std::memory_order_acquire) == 0 &&
         counters_.in_flight.load(std::memory_order_acquire) == 0 &&
         counters_.outcomes_in_transit.load(std::memory_order_acquire) == 0;
}

}  // namespace surge::engine
