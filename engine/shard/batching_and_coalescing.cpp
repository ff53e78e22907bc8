// Spike relief for slow partners, both opt-in per subscriber: batches (several
// rows in one request, one token and one slot) and coalescing (of the due rows sharing a key,
// only the newest is sent). The pump and the claim answer call these; the rules themselves are
// pure (proto/batch, proto/coalesce).
#include "engine/shard/core.hpp"

#include <algorithm>
#include <unordered_map>

#include "engine/shard/delivery.hpp"

namespace surge::engine {

bool shard_core::may_join_batch(const subscriber_state& sub, const storage::claimed_row& row,
                                int rows, std::int64_t payload_bytes, bool check_json) const {
  // A row the pump would refuse, hand back or send alone stays at the front for it.
  const auto size = static_cast<std::int64_t>(row.payload.size());
  if (row.payload_bytes != size ||
      static_cast<std::size_t>(row.payload_bytes) > config_.scheduler.max_payload_bytes) {
    return false;
  }
  if (proto::batch_body_bytes(payload_bytes + size, rows + 1) > sub.settings.batch_bytes) {
    return false;
  }
  const double now_unix = now_.unix_seconds();
  if (!refusal_of(row, now_unix).empty() || lease_too_short(row, now_unix)) return false;
  return !check_json || proto::is_json_value(row.payload);
}

bool shard_core::batch_full(const subscriber_state& sub) const {
  int rows = 0;
  std::int64_t bytes = 0;
  for (const auto& row : sub.ready) {
    if (rows == sub.settings.batch_rows) return true;
    // The next row cannot join, so waiting for more would not make this batch bigger.
    if (!may_join_batch(sub, row, rows, bytes, false)) return true;
    ++rows;
    bytes += static_cast<std::int64_t>(row.payload.size());
  }
  return rows >= sub.settings.batch_rows;
}

attempt_rows shard_core::take_request_rows(subscriber_state& sub, bool& batched) {
  attempt_rows rows;
  sub.batch_wait_since.reset();
  auto take_front = [&] {
    rows.push_back(std::move(sub.ready.front()));
    sub.ready.pop_front();
  };
  // Without batching, or for a payload that cannot be an array element or is over the byte cap
  // on its own, the front row goes alone in the single-row format.
  batched = sub.settings.batch_rows > 1 && may_join_batch(sub, sub.ready.front(), 0, 0, true);
  take_front();
  if (!batched) return rows;
  std::int64_t bytes = static_cast<std::int64_t>(rows.front().payload.size());
  while (!sub.ready.empty() && static_cast<int>(rows.size()) < sub.settings.batch_rows &&
         may_join_batch(sub, sub.ready.front(), static_cast<int>(rows.size()), bytes, true)) {
    bytes += static_cast<std::int64_t>(sub.ready.front().payload.size());
    take_front();
  }
  return rows;
}

void shard_core::coalesce_ready(subscriber_state& sub) {
  const auto& rule = *sub.settings.coalesce;
  std::vector<proto::coalesce_candidate> candidates;
  candidates.reserve(sub.ready.size());
  for (const auto& row : sub.ready) {
    // A payload left in the database for its size has no key here: it is sent (or refused) as
    // usual.
    auto key =
        row.payload.empty() ? std::nullopt : proto::coalesce_key(rule, row.event_type, row.payload);
    candidates.push_back({.id = row.id,
                          .created_at = row.created_at,
                          .key = std::move(key),
                          .stands_since = row.coalesced_since});
  }
  const auto replaced_by = proto::plan_coalescing(candidates, rule.window_seconds);
  if (std::all_of(replaced_by.begin(), replaced_by.end(), [](auto id) { return id == 0; })) {
    return;
  }
  // The rows kept take on what the rows merged into them stood for, here and in the queue (the
  // coalesced outcome carries it), so a later merge of a kept row counts the whole chain.
  std::unordered_map<std::int64_t, std::size_t> keeper_at;
  for (std::size_t i = 0; i < replaced_by.size(); ++i) {
    if (replaced_by[i] == 0) keeper_at.emplace(sub.ready[i].id, i);
  }
  std::vector<double> merged_since(replaced_by.size(), 0);
  for (std::size_t i = 0; i < replaced_by.size(); ++i) {
    if (replaced_by[i] == 0) continue;
    auto& keeper = candidates[keeper_at.at(replaced_by[i])];
    merged_since[i] = std::min(candidates[i].created_at,
                               candidates[i].stands_since.value_or(candidates[i].created_at));
    keeper.stands_since = proto::stands_since_after_merge(keeper, candidates[i]);
  }
  const double now = now_.unix_seconds();
  ready_rows kept;
  for (std::size_t i = 0; i < replaced_by.size(); ++i) {
    auto& row = sub.ready[i];
    if (replaced_by[i] == 0) {
      row.coalesced_since = candidates[i].stands_since;
      kept.push_back(std::move(row));
      continue;
    }
    adjust_buffered(-1);
    let_go(sub, row);
    counters_.add(counters_.coalesced);
    auto out = outcome_for(row, storage::outcome_kind::coalesced);
    out.coalesced_into = replaced_by[i];
    out.coalesced_since = merged_since[i];
    out.last_error = "coalesced into delivery " + std::to_string(replaced_by[i]);
    out.finished_at = now;
    push_outcome(std::move(out));
  }
  sub.ready = std::move(kept);
}

}  // namespace surge::engine
