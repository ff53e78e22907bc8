#include "engine/shard/demand_planner.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

namespace surge::engine {

namespace {

using clock = demand_planner::clock;

// Rows of an unusable subscriber are claimed in batches of this size to be dead-lettered.
constexpr int unusable_claim_batch = 64;

scheduling::token_facts token_facts_of(const subscriber_state& sub, clock::time_point now) {
  return {.has_rows = !sub.ready.empty(),
          .claim_pending = sub.pending_claim > 0,
          .idle_poll = sub.idle_poll > std::chrono::milliseconds(0),
          .active = sub.settings.active,
          .unusable = !sub.settings.unusable_reason.empty(),
          .paused = sub.limits.stopped(now),
          .circuit_blocking = sub.breaker.blocking(),
          .probe_due = sub.probe_due(now)};
}

// The requests `sub` could start at once (rows ready, slots free, its own bucket's tokens): all a
// shared persisted bucket is asked for (token_allowance::ask). Requests, not rows: a batch takes
// one token.
double sendable_now(const subscriber_state& sub, clock::time_point now) {
  const auto rows = static_cast<double>(sub.ready.size());
  const double requests = std::ceil(rows / std::max(1, sub.settings.batch_rows));
  const double slots = std::max(0, sub.settings.in_flight_cap - sub.in_flight);
  return std::min({requests, slots, std::floor(sub.limits.bucket().tokens_at(now))});
}

// One without rows, a claim under way or tokens held or asked for can neither want tokens nor
// give any back.
bool token_watch_needed(const subscriber_state& sub) {
  return !sub.ready.empty() || sub.pending_claim > 0 || sub.limits.allowance().tokens() > 0 ||
         sub.limits.allowance().asking();
}

double seconds(std::chrono::milliseconds duration) {
  return std::chrono::duration<double>(duration).count();
}

}  // namespace

demand_planner::demand_planner(const scheduler_config& config, const subscriber_map& subscribers)
    : limits_{.horizon_seconds = seconds(config.claim_horizon),
              .buffer_per_slot = config.buffer_per_slot,
              .unusable_batch = unusable_claim_batch,
              .coalesce_lookahead_rows = config.coalesce_lookahead_rows,
              .coalesce_lookahead_seconds = seconds(config.coalesce_lookahead)},
      idle_poll_min_(config.idle_poll_min),
      idle_poll_max_(config.idle_poll_max),
      subscribers_(subscribers) {}

void demand_planner::add(subscriber_state& sub) {
  sub.scan_index = order_.size();
  poll_after_.emplace_back();
  order_.push_back(&sub);
}

subscriber_state* demand_planner::find(std::int64_t id) const {
  auto it = subscribers_.find(id);
  return it == subscribers_.end() ? nullptr : it->second.get();
}

std::vector<storage::subscriber_demand> demand_planner::plan(int row_room, payload_memory& memory,
                                                             clock::time_point now) {
  std::vector<storage::subscriber_demand> demand;
  if (outstanding_) return demand;
  plan_rows(row_room - pending_total_, memory, now, demand);
  plan_tokens(now, demand);
  outstanding_ = !demand.empty();
  return demand;
}

void demand_planner::plan_rows(int budget, payload_memory& memory, clock::time_point now,
                               std::vector<storage::subscriber_demand>& demand) {
  // The shard as a whole buffers at most a few rows per in-flight slot, so that under a global
  // cap no claimed row waits near its lease. The scan starts where the last budget ran out, so
  // no subscriber is always last in line.
  // The payload memory, in bytes: each subscriber's rows are counted at their own weight.
  double free_bytes = memory.free_bytes();
  const std::size_t count = order_.size();
  std::size_t visited = 0;
  // Who would join a round, and whether anyone starts one (scheduling::claim_round): without a
  // subscriber at half of what it may hold, nobody is claimed for.
  candidates_.clear();
  bool round_started = false;
  for (; visited < count && budget > 0; ++visited) {
    const std::size_t at = (cursor_ + visited) % count;
    // rows_to_claim's first rule, read from the compact array: most of a quiet table is waiting
    // for its idle poll, and nothing else of theirs need be read.
    if (now < poll_after_[at]) continue;
    auto& sub = *order_[at];
    const scheduling::demand_facts facts{
        .poll_later = false,  // read above
        .active = sub.settings.active,
        .unusable = !sub.settings.unusable_reason.empty(),
        .paused = sub.limits.stopped(now),
        .circuit_blocking = sub.breaker.blocking(),
        .probe_due = sub.probe_due(now),
        .tokens_now = sub.limits.bucket().tokens_at(now),
        .rate = sub.limits.bucket().rate(),
        .in_flight_cap = sub.settings.in_flight_cap,
        .batch_rows = sub.settings.batch_rows,
        .coalescing = sub.settings.coalesce.has_value(),
        .held = static_cast<int>(sub.ready.size()) + sub.pending_claim};
    const int allowed = std::min(budget, memory.rows_within(sub.payload, free_bytes));
    const int want =
        scheduling::rows_to_claim(facts, limits_, allowed, scheduling::claim_round::join);
    if (want <= 0) continue;
    round_started = round_started || scheduling::rows_to_claim(facts, limits_, allowed) > 0;
    candidates_.push_back({&sub, want});
    budget -= want;
    free_bytes -= want * memory.row_weight(sub.payload);
  }
  if (count > 0) cursor_ = (cursor_ + visited) % count;
  if (!round_started) return;
  for (const auto& [sub, want] : candidates_) {
    sub->pending_claim += want;
    pending_total_ += want;
    memory.asked(sub->payload, want);
    // A coalescing subscriber's rows are bounded by what the backlog sweep judged: the storage
    // thread fills the bound in.
    demand.push_back(
        {.subscriber_id = sub->settings.id,
         .rows = want,
         .order = sub->settings.order,
         .judged_through = sub->settings.coalesce ? std::optional<std::int64_t>(0) : std::nullopt});
    watch_tokens(*sub);
  }
}

void demand_planner::plan_tokens(clock::time_point now,
                                 std::vector<storage::subscriber_demand>& demand) {
  // Tokens ride in the same message, for every subscriber about to send (the row budget does
  // not limit them): entries of their own, with no rows. Tokens left unspent for a whole lease
  // go back the same way, as a negative ask. Only watched subscribers are visited: a quiet table
  // of thousands would otherwise be walked every demand round.
  std::size_t kept = 0;
  for (auto* sub : watched_) {
    if (const double stale = sub->limits.allowance().take_stale(now); stale > 0) {
      demand.push_back({.subscriber_id = sub->settings.id, .tokens = -stale});
    } else if (sub->limits.allowance().would_ask(sub->settings.rate, now,
                                                 sendable_now(*sub, now)) &&
               scheduling::wants_tokens(token_facts_of(*sub, now))) {
      const double tokens =
          sub->limits.allowance().ask(sub->settings.rate, now, sendable_now(*sub, now));
      if (tokens > 0) {
        demand.push_back({.subscriber_id = sub->settings.id,
                          .tokens = tokens,
                          .reserve_seconds = sub->limits.allowance().ahead_seconds()});
      }
    }
    if (token_watch_needed(*sub)) {
      watched_[kept++] = sub;
    } else {
      sub->token_watched = false;
    }
  }
  watched_.resize(kept);
}

void demand_planner::answered(const claim_reply& reply, payload_memory& memory) {
  outstanding_ = false;
  for (const auto& asked : reply.asked) {
    pending_total_ -= asked.rows;
    auto* sub = find(asked.subscriber_id);
    if (sub == nullptr) continue;
    sub->pending_claim = std::max(0, sub->pending_claim - asked.rows);
    sub->rows_in_answer = 0;
    if (asked.rows > 0) memory.asked_answered(sub->payload);
  }
  pending_total_ = std::max(0, pending_total_);
  if (pending_total_ == 0) memory.nothing_asked();
}

void demand_planner::settle_polls(const claim_reply& reply, clock::time_point now,
                                  std::vector<subscriber_state*>& got_rows) {
  for (const auto& asked : reply.asked) {
    if (asked.rows <= 0) continue;  // it asked for tokens only
    auto* sub = find(asked.subscriber_id);
    if (sub == nullptr) continue;
    const int rows = sub->rows_in_answer;
    const bool more_due = std::find(reply.more_due.begin(), reply.more_due.end(),
                                    asked.subscriber_id) != reply.more_due.end();
    const bool key_freed = std::exchange(sub->key_freed, false);
    if (rows < asked.rows && !more_due && !key_freed) {
      sub->idle_poll = std::clamp(sub->idle_poll * 2, idle_poll_min_, idle_poll_max_);
      poll_after_of(*sub) = now + sub->idle_poll;
    } else {
      sub->idle_poll = std::chrono::milliseconds(0);
    }
    if (rows > 0) got_rows.push_back(sub);
  }
}

void demand_planner::take_grants(const claim_reply& reply, clock::time_point now, double now_unix,
                                 std::vector<subscriber_state*>& granted) {
  if (reply.granted.empty()) {
    // Not answered (the drain stops claiming, or the cycle failed): the next plan asks again.
    for (const auto& asked : reply.asked) {
      if (asked.tokens <= 0) continue;
      if (auto* sub = find(asked.subscriber_id)) sub->limits.allowance().unanswered();
    }
    return;
  }
  for (const auto& grant : reply.granted) {
    auto* sub = find(grant.subscriber_id);
    if (sub == nullptr) continue;  // gone: its tokens are spent by nobody
    auto next_token_in = clock::duration::max();
    if (grant.next_token_at > 0) {
      // Clamped first: a tiny rate puts the next token ages away, past what the clock can add.
      const double wait = std::clamp(grant.next_token_at - now_unix, 0.0, 3600.0);
      next_token_in =
          std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(wait));
    }
    sub->limits.allowance().granted(grant.tokens, now, next_token_in, grant.shared);
    granted.push_back(sub);
  }
}

void demand_planner::poll_now(subscriber_state& sub, clock::time_point now) {
  sub.idle_poll = std::chrono::milliseconds(0);
  poll_after_of(sub) = std::min(poll_after_of(sub), now);
}

void demand_planner::poll_no_earlier(subscriber_state& sub, clock::time_point at) {
  poll_after_of(sub) = std::max(poll_after_of(sub), at);
}

void demand_planner::watch_tokens(subscriber_state& sub) {
  if (sub.token_watched) return;
  sub.token_watched = true;
  watched_.push_back(&sub);
}

}  // namespace surge::engine
