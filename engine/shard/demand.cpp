// How a shard asks the storage thread for rows (how many each subscriber can use soon) and takes
// the answer into its ready queues (claim by demand: docs/design.md,
// "Claims and outcome writes").
#include "engine/shard/core.hpp"

#include <algorithm>
#include <utility>

#include "engine/shard/delivery.hpp"

namespace surge::engine {

void shard_core::on_claimed(claim_reply reply, shard_time time) {
  if (!begin_event(time)) return;
  demand_.answered(reply, rows_.memory());
  auto& joined = joined_scratch_;
  joined.clear();
  rows_.take_answer(reply.rows, subscribers_, stopping_, joined);
  std::vector<subscriber_state*> to_coalesce;
  for (auto* sub : joined) {
    demand_.watch_tokens(*sub);
    if (sub->settings.coalesce) to_coalesce.push_back(sub);
  }
  // New rows may repeat a key already waiting (or each other): only the newest is kept.
  std::sort(to_coalesce.begin(), to_coalesce.end());
  to_coalesce.erase(std::unique(to_coalesce.begin(), to_coalesce.end()), to_coalesce.end());
  for (auto* sub : to_coalesce) rows_.coalesce_ready(*sub, now_.unix_seconds());
  auto& to_notify = answered_scratch_;
  to_notify.clear();
  demand_.take_grants(reply, now_.steady, now_.unix_seconds(), to_notify);
  // A poll that found nothing changes nothing the pump decides on; waking it would only cancel
  // and re-arm its timer, thousands of times a second on a large, quiet table.
  demand_.settle_polls(reply, now_.steady, to_notify);
  for (auto* sub : to_notify) notify(*sub);
  // A stopping shard may have been waiting for this answer to finish (end_event).
  end_event();
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
    it->second->limits.taken_over(now);
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
    rows_.release_ready(sub);
    notify_line(sub);
  }
  end_event();
}

void shard_core::wake_subscribers(const std::vector<std::int64_t>& ids, bool all) {
  if (stopping_) return;
  // New rows end the idle backoff; pauses, open circuits and buckets still decide in the plan.
  if (all) {
    for (auto* sub : demand_.scan_order()) demand_.poll_now(*sub, now_.steady);
  } else {
    for (const auto id : ids) {
      auto it = subscribers_.find(id);
      if (it != subscribers_.end()) demand_.poll_now(*it->second, now_.steady);
    }
  }
  // Now rather than at the next demand tick; an answer on its way will be followed by one.
  send_demand();
}

void shard_core::claim_after_key_freed(subscriber_state& sub) {
  // The storage thread writes an outcome that frees a key with the next claim
  // (engine/storage_thread/commit_timing.hpp), so the claim sent here finds the key's next row.
  rows_.flush();
  sub.key_freed = true;
  demand_.poll_now(sub, now_.steady);
  if (!stopping_) send_demand();
}

void shard_core::send_demand() {
  auto demand =
      demand_.plan(slots_.in_flight_cap() * config_.scheduler.buffer_per_slot - rows_.buffered(),
                   rows_.memory(), now_.steady);
  if (!demand.empty()) out_.claim = std::move(demand);
}

}  // namespace surge::engine
