// How a shard asks the storage thread for rows (how many each subscriber can use soon) and takes
// the answer into its ready queues (claim by demand: docs/design.md,
// "Claims and outcome writes").
#include "engine/shard/core.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "engine/shard/delivery.hpp"

namespace surge::engine {

namespace {

// Rows of an unusable subscriber are claimed in batches of this size to be dead-lettered.
constexpr int unusable_claim_batch = 64;

}  // namespace

void shard_core::on_claimed(claim_reply reply, shard_time time) {
  if (!begin_event(time)) return;
  claim_outstanding_ = false;
  const auto now = now_.steady;
  for (const auto& asked : reply.asked) {
    auto it = subscribers_.find(asked.subscriber_id);
    if (it == subscribers_.end()) continue;
    auto& sub = *it->second;
    sub.pending_claim = std::max(0, sub.pending_claim - asked.rows);
    sub.rows_in_answer = 0;
    if (asked.rows > 0) memory_.asked_answered(sub.payload);
  }
  for (const auto& asked : reply.asked) pending_total_ -= asked.rows;
  pending_total_ = std::max(0, pending_total_);
  if (pending_total_ == 0) memory_.nothing_asked();
  std::vector<subscriber_state*> to_coalesce;
  // The shared counters move once per answer, not once per row: each move is a write to a cache
  // line the other threads read.
  if (!reply.rows.empty()) {
    counters_.add(counters_.claimed, static_cast<std::int64_t>(reply.rows.size()));
  }
  int taken = 0;
  std::int64_t answer_bytes = 0;
  for (auto& row : reply.rows) {
    auto it = subscribers_.find(row.subscriber_id);
    if (it == subscribers_.end()) {
      push_outcome(outcome_for(row, storage::outcome_kind::release));
      continue;
    }
    auto& sub = *it->second;
    ++sub.rows_in_answer;
    if (stopping_) {
      push_outcome(outcome_for(row, storage::outcome_kind::release));
      continue;
    }
    if (sub.settings.coalesce) to_coalesce.push_back(&sub);
    const auto bytes = static_cast<std::int64_t>(row.payload.size());
    answer_bytes += bytes;
    memory_.take_row(sub.payload, bytes);
    sub.ready.push_back(std::move(row));
    watch_tokens(sub);
    ++taken;
  }
  if (taken > 0) {
    adjust_buffered(taken);
    memory_.answered(taken, answer_bytes);
  }
  // New rows may repeat a key already waiting (or each other): only the newest is kept.
  std::sort(to_coalesce.begin(), to_coalesce.end());
  to_coalesce.erase(std::unique(to_coalesce.begin(), to_coalesce.end()), to_coalesce.end());
  for (auto* sub : to_coalesce) coalesce_ready(*sub);
  accept_tokens(reply);
  // A short answer means the subscriber has nothing more due right now: poll it less often.
  for (const auto& asked : reply.asked) {
    if (asked.rows <= 0) continue;  // it asked for tokens only
    auto it = subscribers_.find(asked.subscriber_id);
    if (it == subscribers_.end()) continue;
    auto& sub = *it->second;
    const int rows = sub.rows_in_answer;
    const bool more_due = std::find(reply.more_due.begin(), reply.more_due.end(),
                                    asked.subscriber_id) != reply.more_due.end();
    const bool key_freed = std::exchange(sub.key_freed, false);
    if (rows < asked.rows && !more_due && !key_freed) {
      sub.idle_poll = std::clamp(sub.idle_poll * 2, config_.scheduler.idle_poll_min,
                                 config_.scheduler.idle_poll_max);
      poll_after_of(sub) = now + sub.idle_poll;
    } else {
      sub.idle_poll = std::chrono::milliseconds(0);
    }
    // A poll that found nothing changes nothing the pump decides on; waking it would only
    // cancel and re-arm its timer, thousands of times a second on a large, quiet table.
    if (rows > 0) notify(sub);
  }
  // A stopping shard may have been waiting for this answer to finish (end_event).
  end_event();
}

void shard_core::accept_tokens(const claim_reply& reply) {
  const auto now = now_.steady;
  if (reply.granted.empty()) {
    // Not answered (the drain stops claiming, or the cycle failed): the next scan asks again.
    for (const auto& asked : reply.asked) {
      if (asked.tokens <= 0) continue;
      if (auto it = subscribers_.find(asked.subscriber_id); it != subscribers_.end()) {
        it->second->allowance.unanswered();
      }
    }
    return;
  }
  const double now_unix = now_.unix_seconds();
  for (const auto& grant : reply.granted) {
    auto it = subscribers_.find(grant.subscriber_id);
    if (it == subscribers_.end()) continue;  // gone: its tokens are spent by nobody
    auto next_token_in = steady::duration::max();
    if (grant.next_token_at > 0) {
      // Clamped first: a tiny rate puts the next token ages away, past what the clock can add.
      const double seconds = std::clamp(grant.next_token_at - now_unix, 0.0, 3600.0);
      next_token_in =
          std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(seconds));
    }
    it->second->allowance.granted(grant.tokens, now, next_token_in, grant.shared);
    notify(*it->second);
  }
}

void shard_core::on_new_rows(const std::vector<std::int64_t>& subscriber_ids, bool all,
                             shard_time now) {
  if (!begin_event(now)) return;
  wake_subscribers(subscriber_ids, all);
  end_event();
}

void shard_core::on_taken(const std::vector<std::int64_t>& subscriber_ids, shard_time time) {
  if (!begin_event(time)) return;
  const auto now = now_.steady;
  for (const auto id : subscriber_ids) {
    auto it = subscribers_.find(id);
    if (it == subscribers_.end()) continue;
    // Whatever these buckets saved up while another drain owned the subscriber was that
    // drain's to spend: starting empty, the two together send at most burst + rate x T.
    it->second->bucket.empty(now);
    it->second->wire.empty(now);
    it->second->allowance.ask_now();  // asks answered "not yours" said to wait a second
    it->second->disowned = false;
  }
  wake_subscribers(subscriber_ids, false);
  end_event();
}

void shard_core::on_disowned(const std::vector<std::int64_t>& subscriber_ids, shard_time now) {
  if (!begin_event(now)) return;
  for (const auto id : subscriber_ids) {
    auto it = subscribers_.find(id);
    if (it == subscribers_.end()) continue;
    // Requests already written finish (their outcomes are fenced by their row leases); the
    // rest give their rows back, so the new owner's sends never overlap ours. The tokens
    // leased for the subscriber go back once unspent for a lease (take_stale).
    auto& sub = *it->second;
    sub.disowned = true;
    release_ready(sub);
    notify_line(sub);
  }
  end_event();
}

void shard_core::wake_subscribers(const std::vector<std::int64_t>& ids, bool all) {
  if (stopping_) return;
  const auto now = now_.steady;
  // New rows end the idle backoff; pauses, open circuits and buckets still decide in
  // send_demand, which reads them apart from poll_after.
  auto wake = [this, now](subscriber_state& sub) {
    sub.idle_poll = std::chrono::milliseconds(0);
    poll_after_of(sub) = std::min(poll_after_of(sub), now);
  };
  if (all) {
    for (auto* sub : order_) wake(*sub);
  } else {
    for (const auto id : ids) {
      auto it = subscribers_.find(id);
      if (it != subscribers_.end()) wake(*it->second);
    }
  }
  // Now rather than at the next demand tick; an answer on its way will be followed by one.
  if (!claim_outstanding_) send_demand();
}

void shard_core::claim_after_key_freed(subscriber_state& sub) {
  // The storage thread writes an outcome that frees a key with the next claim
  // (engine/storage_thread/commit_timing.hpp), so the claim sent here finds the key's next row.
  flush_outcomes();
  sub.key_freed = true;
  sub.idle_poll = std::chrono::milliseconds(0);
  poll_after_of(sub) = std::min(poll_after_of(sub), now_.steady);
  if (!claim_outstanding_ && !stopping_) send_demand();
}

scheduling::token_facts shard_core::token_facts_of(const subscriber_state& sub) const {
  const auto now = now_.steady;
  return {.has_rows = !sub.ready.empty(),
          .claim_pending = sub.pending_claim > 0,
          .idle_poll = sub.idle_poll > std::chrono::milliseconds(0),
          .active = sub.settings.active,
          .unusable = !sub.settings.unusable_reason.empty(),
          .paused = sub.bucket.paused() || sub.paused_until > now,
          .circuit_blocking = sub.breaker.blocking(),
          .probe_due = sub.probe_due(now)};
}

double shard_core::sendable_now(const subscriber_state& sub) const {
  // Requests, not rows: a batch takes one token.
  const auto rows = static_cast<double>(sub.ready.size());
  const double requests = std::ceil(rows / std::max(1, sub.settings.batch_rows));
  const double slots = std::max(0, sub.settings.in_flight_cap - sub.in_flight);
  return std::min({requests, slots, std::floor(sub.bucket.tokens_at(now_.steady))});
}

void shard_core::watch_tokens(subscriber_state& sub) {
  if (sub.token_watched) return;
  sub.token_watched = true;
  token_watch_.push_back(&sub);
}

bool shard_core::token_watch_needed(const subscriber_state& sub) {
  return !sub.ready.empty() || sub.pending_claim > 0 || sub.allowance.tokens() > 0 ||
         sub.allowance.asking();
}

void shard_core::send_demand() {
  const auto now = now_.steady;
  const auto& scheduler = config_.scheduler;
  const scheduling::demand_limits limits{
      .horizon_seconds = std::chrono::duration<double>(scheduler.claim_horizon).count(),
      .buffer_per_slot = scheduler.buffer_per_slot,
      .unusable_batch = unusable_claim_batch,
      .coalesce_lookahead_rows = scheduler.coalesce_lookahead_rows,
      .coalesce_lookahead_seconds =
          std::chrono::duration<double>(scheduler.coalesce_lookahead).count()};
  std::vector<storage::subscriber_demand> demand;
  // The shard as a whole buffers at most a few rows per in-flight slot, so that under a global
  // cap no claimed row waits near its lease. The scan starts where the last budget ran out, so
  // no subscriber is always last in line.
  int budget = in_flight_cap_ * config_.scheduler.buffer_per_slot - buffered_ - pending_total_;
  // The payload memory, in bytes: each subscriber's rows are counted at their own weight.
  double free_bytes = memory_.free_bytes();
  const std::size_t count = order_.size();
  std::size_t visited = 0;
  // Who would join a round, and whether anyone starts one (scheduling::claim_round): without a
  // subscriber at half of what it may hold, nobody is claimed for.
  round_candidates_.clear();
  bool round_started = false;
  for (; visited < count && budget > 0; ++visited) {
    const std::size_t at = (demand_cursor_ + visited) % count;
    // rows_to_claim's first rule, read from the compact array: most of a quiet table is waiting
    // for its idle poll, and nothing else of theirs need be read.
    if (now < poll_after_[at]) continue;
    auto& sub = *order_[at];
    const scheduling::demand_facts facts{
        .poll_later = false,  // read above
        .active = sub.settings.active,
        .unusable = !sub.settings.unusable_reason.empty(),
        .paused = sub.bucket.paused() || sub.paused_until > now,
        .circuit_blocking = sub.breaker.blocking(),
        .probe_due = sub.probe_due(now),
        .tokens_now = sub.bucket.tokens_at(now),
        .rate = sub.bucket.rate(),
        .in_flight_cap = sub.settings.in_flight_cap,
        .batch_rows = sub.settings.batch_rows,
        .coalescing = sub.settings.coalesce.has_value(),
        .held = static_cast<int>(sub.ready.size()) + sub.pending_claim};
    const int allowed = std::min(budget, memory_.rows_within(sub.payload, free_bytes));
    const int want =
        scheduling::rows_to_claim(facts, limits, allowed, scheduling::claim_round::join);
    if (want <= 0) continue;
    round_started = round_started || scheduling::rows_to_claim(facts, limits, allowed) > 0;
    round_candidates_.push_back({&sub, want});
    budget -= want;
    free_bytes -= want * memory_.row_weight(sub.payload);
  }
  if (count > 0) demand_cursor_ = (demand_cursor_ + visited) % count;
  for (const auto& [sub, want] :
       round_started ? round_candidates_ : std::span<const round_candidate>{}) {
    sub->pending_claim += want;
    pending_total_ += want;
    memory_.asked(sub->payload, want);
    // A coalescing subscriber's rows are bounded by what the backlog sweep judged: the storage
    // thread fills the bound in.
    demand.push_back(
        {.subscriber_id = sub->settings.id,
         .rows = want,
         .order = sub->settings.order,
         .judged_through = sub->settings.coalesce ? std::optional<std::int64_t>(0) : std::nullopt});
    watch_tokens(*sub);
  }
  // Tokens ride in the same message, for every subscriber about to send (the row budget does
  // not limit them): entries of their own, with no rows.
  // Tokens left unspent for a whole lease go back the same way, as a negative ask.
  // Only watched subscribers are visited: one without rows, a claim under way or tokens held or
  // asked for can neither want tokens nor give any back, and a quiet table of thousands would
  // otherwise be walked every demand round.
  std::size_t watched = 0;
  for (auto* sub : token_watch_) {
    if (const double stale = sub->allowance.take_stale(now); stale > 0) {
      demand.push_back({.subscriber_id = sub->settings.id, .tokens = -stale});
    } else if (sub->allowance.would_ask(sub->settings.rate, now, sendable_now(*sub)) &&
               scheduling::wants_tokens(token_facts_of(*sub))) {
      const double tokens = sub->allowance.ask(sub->settings.rate, now, sendable_now(*sub));
      if (tokens > 0) {
        demand.push_back({.subscriber_id = sub->settings.id,
                          .tokens = tokens,
                          .reserve_seconds = sub->allowance.ahead_seconds()});
      }
    }
    if (token_watch_needed(*sub)) {
      token_watch_[watched++] = sub;
    } else {
      sub->token_watched = false;
    }
  }
  token_watch_.resize(watched);
  if (demand.empty()) return;
  claim_outstanding_ = true;
  out_.claim = std::move(demand);
}

}  // namespace surge::engine
