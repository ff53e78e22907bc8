// The rows a shard holds and the outcomes they leave with (engine/shard/shard_rows.hpp).
#include "engine/shard/shard_rows.hpp"

#include <utility>

namespace surge::engine {

shard_rows::shard_rows(const scheduler_config& config, int shard_count, drain_counters& counters,
                       std::vector<outcome_write>& writes)
    : flush_rows_(config.outcome_flush_rows),
      counters_(counters),
      writes_(writes),
      memory_(static_cast<double>(config.max_payload_memory) / shard_count,
              config.max_payload_bytes) {}

void shard_rows::take_answer(std::vector<storage::claimed_row>& rows,
                             const subscriber_map& subscribers, bool stopping,
                             std::vector<subscriber_state*>& joined) {
  // The shared counters move once per answer, not once per row: each move is a write to a cache
  // line the other threads read.
  if (!rows.empty()) counters_.add(counters_.claimed, static_cast<std::int64_t>(rows.size()));
  int taken = 0;
  std::int64_t bytes = 0;
  for (auto& row : rows) {
    auto it = subscribers.find(row.subscriber_id);
    if (it == subscribers.end()) {
      refuse(row);
      continue;
    }
    auto& sub = *it->second;
    ++sub.rows_in_answer;
    if (stopping) {
      refuse(row);
      continue;
    }
    const auto size = static_cast<std::int64_t>(row.payload.size());
    bytes += size;
    memory_.take_row(sub.payload, size);
    sub.ready.push_back(std::move(row));
    joined.push_back(&sub);
    ++taken;
  }
  if (taken == 0) return;
  adjust_buffered(taken);
  memory_.answered(taken, bytes);
}

void shard_rows::refuse(const storage::claimed_row& row) {
  push(outcome_for(row, storage::outcome_kind::release));
}

void shard_rows::sent(int rows) { adjust_buffered(-rows); }

void shard_rows::release_ready(subscriber_state& sub) {
  for (auto& row : sub.ready) {
    let_go(sub, row);
    counters_.add(counters_.released);
    push(outcome_for(row, storage::outcome_kind::release));
    adjust_buffered(-1);
  }
  sub.ready.clear();
}

void shard_rows::release_front(subscriber_state& sub) {
  auto row = std::move(sub.ready.front());
  sub.ready.pop_front();
  let_go(sub, row);
  counters_.add(counters_.released);
  push(outcome_for(row, storage::outcome_kind::release));
  adjust_buffered(-1);
}

void shard_rows::reschedule_ready(subscriber_state& sub, double next_attempt_at,
                                  const std::string& reason) {
  for (auto& row : sub.ready) {
    let_go(sub, row);
    auto out = outcome_for(row, storage::outcome_kind::retry);
    out.next_attempt_at = next_attempt_at;
    out.last_error = reason;
    push(std::move(out));
    adjust_buffered(-1);
  }
  sub.ready.clear();
}

void shard_rows::dead_letter_all(subscriber_state& sub, const std::string& reason,
                                 double now_unix) {
  while (!sub.ready.empty()) dead_letter_front(sub, reason, now_unix);
}

void shard_rows::dead_letter_front(subscriber_state& sub, std::string reason, double now_unix) {
  auto row = std::move(sub.ready.front());
  sub.ready.pop_front();
  let_go(sub, row);
  counters_.add(counters_.dead);
  auto out = outcome_for(row, storage::outcome_kind::dead);
  out.last_error = std::move(reason);
  out.finished_at = now_unix;
  push(std::move(out));
  adjust_buffered(-1);
}

void shard_rows::coalesce_ready(subscriber_state& sub, double now_unix) {
  auto& merged = coalesced_scratch_;
  merged.clear();
  coalesce(sub.ready, *sub.settings.coalesce, merged);
  for (auto& m : merged) {
    let_go(sub, m.row);
    counters_.add(counters_.coalesced);
    auto out = outcome_for(m.row, storage::outcome_kind::coalesced);
    out.coalesced_into = m.into;
    out.coalesced_since = m.since;
    out.last_error = "coalesced into delivery " + std::to_string(m.into);
    out.finished_at = now_unix;
    push(std::move(out));
    adjust_buffered(-1);
  }
}

void shard_rows::give_back_unsent(subscriber_state& sub, const storage::claimed_row& row,
                                  std::chrono::steady_clock::time_point now, double now_unix) {
  if (sub.limits.paused(now)) {
    auto out = outcome_for(row, storage::outcome_kind::retry);
    out.next_attempt_at =
        now_unix + std::chrono::duration<double>(sub.limits.paused_until() - now).count();
    out.last_error = "subscriber paused by Retry-After";
    push(std::move(out));
    return;
  }
  counters_.add(counters_.released);
  push(outcome_for(row, storage::outcome_kind::release));
}

void shard_rows::retry_unsent(std::span<const storage::claimed_row> rows, double next_attempt_at,
                              const std::string& reason) {
  for (const auto& row : rows) {
    auto out = outcome_for(row, storage::outcome_kind::retry);
    out.attempts = row.attempts;
    out.next_attempt_at = next_attempt_at;
    out.last_error = reason;
    push(std::move(out));
  }
}

void shard_rows::settled(storage::outcome outcome) {
  switch (outcome.kind) {
    case storage::outcome_kind::done: counters_.add(counters_.delivered); break;
    case storage::outcome_kind::retry: counters_.add(counters_.retried); break;
    case storage::outcome_kind::dead: counters_.add(counters_.dead); break;
    case storage::outcome_kind::coalesced: counters_.add(counters_.coalesced); break;
    case storage::outcome_kind::release: break;
  }
  push(std::move(outcome));
}

void shard_rows::push(storage::outcome outcome) {
  counters_.add(counters_.outcomes_in_transit);
  outcomes_.push_back(std::move(outcome));
  if (outcomes_.size() >= flush_rows_) flush();
}

void shard_rows::flush() {
  if (outcomes_.empty() && deactivate_.empty()) return;
  const auto rows = outcomes_.size();
  writes_.push_back({std::exchange(outcomes_, {}), std::exchange(deactivate_, {})});
  // The vector goes to the storage thread; the next batch is likely as large, and growing it
  // one doubling at a time would cost a malloc per doubling.
  outcomes_.reserve(rows);
}

void shard_rows::adjust_buffered(int delta) {
  buffered_ += delta;
  // Released: the rows' next place (in flight, an outcome in transit) was counted first.
  counters_.buffered.fetch_add(delta, std::memory_order_release);
}

}  // namespace surge::engine
