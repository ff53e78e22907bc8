#include "engine/shard/ready_rows.hpp"

#include <algorithm>
#include <unordered_map>

#include "proto/batch.hpp"

namespace surge::engine {

namespace {

// Whether `row` may join a batch of `rows` rows and `payload_bytes`: a row the pump would
// refuse, hand back or send alone stays at the front for it.
bool may_join_batch(const storage::claimed_row& row, int rows, std::int64_t payload_bytes,
                    bool check_json, batch_limits limits, const row_checks& checks,
                    double now_unix) {
  const auto size = static_cast<std::int64_t>(row.payload.size());
  if (row.payload_bytes != size ||
      static_cast<std::size_t>(row.payload_bytes) > checks.max_payload_bytes) {
    return false;
  }
  if (proto::batch_body_bytes(payload_bytes + size, rows + 1) > limits.bytes) return false;
  if (!checks.refusal(row, now_unix).empty() || checks.lease_too_short(row, now_unix)) {
    return false;
  }
  return !check_json || proto::is_json_value(row.payload);
}

}  // namespace

std::string row_checks::refusal(const storage::claimed_row& row, double now_unix) const {
  auto why = delivery_refusal(row);
  if (!why.empty() || !retry_window_seconds) return why;
  const double window = *retry_window_seconds;
  if (now_unix - row.created_at > window) {
    why = "retry window passed: enqueued " +
          std::to_string(static_cast<std::int64_t>(now_unix - row.created_at)) + " s ago, limit " +
          std::to_string(static_cast<std::int64_t>(window)) + " s";
  }
  return why;
}

bool batch_full(const ready_rows& ready, batch_limits limits, const row_checks& checks,
                double now_unix) {
  int rows = 0;
  std::int64_t bytes = 0;
  for (const auto& row : ready) {
    if (rows == limits.rows) return true;
    if (!may_join_batch(row, rows, bytes, false, limits, checks, now_unix)) return true;
    ++rows;
    bytes += static_cast<std::int64_t>(row.payload.size());
  }
  return rows >= limits.rows;
}

attempt_rows take_request_rows(ready_rows& ready, batch_limits limits, const row_checks& checks,
                               double now_unix, bool& batched) {
  attempt_rows rows;
  auto take_front = [&] {
    rows.push_back(std::move(ready.front()));
    ready.pop_front();
  };
  // Without batching, or for a payload that cannot be an array element or is over the byte cap
  // on its own, the front row goes alone in the single-row format.
  batched = limits.rows > 1 && may_join_batch(ready.front(), 0, 0, true, limits, checks, now_unix);
  take_front();
  if (!batched) return rows;
  std::int64_t bytes = static_cast<std::int64_t>(rows.front().payload.size());
  while (!ready.empty() && static_cast<int>(rows.size()) < limits.rows &&
         may_join_batch(ready.front(), static_cast<int>(rows.size()), bytes, true, limits, checks,
                        now_unix)) {
    bytes += static_cast<std::int64_t>(ready.front().payload.size());
    take_front();
  }
  return rows;
}

void coalesce(ready_rows& ready, const proto::coalesce_rule& rule,
              std::vector<coalesced_row>& merged) {
  std::vector<proto::coalesce_candidate> candidates;
  candidates.reserve(ready.size());
  for (const auto& row : ready) {
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
  std::unordered_map<std::int64_t, std::size_t> keeper_at;
  for (std::size_t i = 0; i < replaced_by.size(); ++i) {
    if (replaced_by[i] == 0) keeper_at.emplace(ready[i].id, i);
  }
  std::vector<double> merged_since(replaced_by.size(), 0);
  for (std::size_t i = 0; i < replaced_by.size(); ++i) {
    if (replaced_by[i] == 0) continue;
    auto& keeper = candidates[keeper_at.at(replaced_by[i])];
    merged_since[i] = std::min(candidates[i].created_at,
                               candidates[i].stands_since.value_or(candidates[i].created_at));
    keeper.stands_since = proto::stands_since_after_merge(keeper, candidates[i]);
  }
  ready_rows kept(ready.get_allocator());
  for (std::size_t i = 0; i < replaced_by.size(); ++i) {
    auto& row = ready[i];
    if (replaced_by[i] == 0) {
      row.coalesced_since = candidates[i].stands_since;
      kept.push_back(std::move(row));
      continue;
    }
    merged.push_back({std::move(row), replaced_by[i], merged_since[i]});
  }
  ready = std::move(kept);
}

}  // namespace surge::engine
