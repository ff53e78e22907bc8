#include "storage/ordered_claim.hpp"

#include <algorithm>

namespace surge::storage {

std::int64_t ordered_read_limit(int rows) {
  return std::max<std::int64_t>(std::int64_t{8} * rows, 4096);
}

ordered_pick pick_key_heads(const subscriber_demand& entry,
                            const std::set<std::string, std::less<>>& stopped_keys,
                            const ordered_reader& read, std::int64_t read_after) {
  ordered_pick pick;
  pick.stopped_through = read_after;
  if (entry.rows <= 0 || !entry.order) return pick;
  const auto& rule = *entry.order;
  const auto wanted = static_cast<std::size_t>(entry.rows);
  proto::key_heads heads(stopped_keys);
  // Candidates are kept (payloads and all) only until enough of them may go: what a claim holds
  // stays bounded by the rows asked, whatever the window holds.
  std::vector<claimed_row> candidates;
  const auto going = [&] {
    return static_cast<std::size_t>(
        std::count_if(candidates.begin(), candidates.end(),
                      [&](const claimed_row& row) { return heads.may_go(*row.order_key); }));
  };
  std::int64_t after = read_after;
  bool in_stopped_run = true;
  std::int64_t left = ordered_read_limit(entry.rows);
  std::vector<unfinished_row> page;
  while (left > 0) {
    page.clear();
    const std::int64_t limit = std::min(ordered_read_page, left);
    read.page(after, limit, page);
    if (page.empty()) break;
    const std::int64_t last = page.back().row.id;
    std::size_t kept = going();
    for (auto& scanned : page) {
      auto& row = scanned.row;
      // Its payload was left out of the page: read alone, for its key (a row over the claim's
      // cap dies unsent, but under its own key, which it may stop) and, kept, to be sent.
      const bool unread = row.payload.empty() && row.payload_bytes > 0;
      std::string whole;
      if (unread && !rule.pointer.empty()) whole = read.payload_of(row.id);
      auto key = proto::order_key(rule.pointer, unread ? whole : row.payload);
      in_stopped_run = in_stopped_run && stopped_keys.contains(key);
      if (in_stopped_run) pick.stopped_through = row.id;
      // Every row is read into the rule, kept or not: a leased one holds its whole key.
      if (!heads.consider(key, scanned.due, scanned.free) || kept >= wanted) continue;
      if (unread && row.payload_bytes <= read.payload_cap) {
        row.payload = whole.empty() ? read.payload_of(row.id) : std::move(whole);
      }
      row.order_key = std::move(key);
      row.death_stops_key = rule.when_dead == proto::dead_key::stops;
      candidates.push_back(std::move(row));
      ++kept;
    }
    // A whole page is read before deciding: a leased row just after a candidate holds it back.
    if (going() >= wanted || static_cast<std::int64_t>(page.size()) < limit) break;
    after = last;
    left -= limit;
  }
  bool behind_flight = heads.held_behind_flight();
  for (auto& row : candidates) {
    if (!heads.may_go(*row.order_key)) {
      behind_flight = true;  // due and free, behind a leased later row of its key
    } else if (pick.rows.size() < wanted) {
      pick.rows.push_back(std::move(row));
    }
  }
  pick.more_due = pick.rows.size() < wanted && behind_flight;
  return pick;
}

std::int64_t stopped_runs::read_after(std::int64_t subscriber_id,
                                      const std::set<std::string, std::less<>>& stopped_keys,
                                      double now) const {
  if (stopped_keys.empty()) return 0;
  const auto found = runs_.find(subscriber_id);
  if (found == runs_.end() || found->second.keys != stopped_keys ||
      now - found->second.read_from_start_at >= recheck) {
    return 0;
  }
  return found->second.through;
}

void stopped_runs::remember(std::int64_t subscriber_id,
                            const std::set<std::string, std::less<>>& stopped_keys,
                            std::int64_t read_after, std::int64_t through, double now) {
  if (stopped_keys.empty()) {
    runs_.erase(subscriber_id);
    return;
  }
  auto& run = runs_[subscriber_id];
  if (read_after == 0) {
    run.keys = stopped_keys;
    run.read_from_start_at = now;
  }
  run.through = through;
}

}  // namespace surge::storage
