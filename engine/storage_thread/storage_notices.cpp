#include "engine/storage_thread/storage_notices.hpp"

#include <algorithm>
#include <cstddef>

namespace surge::engine::notice {

std::string key_stopped(const storage::stopped_key& stopped) {
  return "subscriber " + std::to_string(stopped.subscriber_id) + ": key " + stopped.key +
         " stopped: delivery " + std::to_string(stopped.delivery_id) +
         " died; its later rows wait for `surge dead replay` or `surge subscriber resume-key`";
}

std::optional<std::string> deleted_in_flight(const storage::write_report& report) {
  if (report.deleted.empty()) return std::nullopt;
  return std::to_string(report.deleted.size()) + " rows (first id " +
         std::to_string(report.deleted.front()) +
         ") were deleted from the queue while they were in flight; their outcomes had nowhere "
         "to go";
}

std::optional<std::string> leases_taken(const storage::write_report& report) {
  const auto& deleted = report.deleted;
  const auto taken = report.lost_leases.size() - deleted.size();
  if (report.lost_leases.empty() || taken == 0) return std::nullopt;
  const auto first =
      std::find_if(report.lost_leases.begin(), report.lost_leases.end(), [&](std::int64_t id) {
        return std::find(deleted.begin(), deleted.end(), id) == deleted.end();
      });
  if (first == report.lost_leases.end()) return std::nullopt;
  return "lost the lease of " + std::to_string(taken) + " rows (first id " +
         std::to_string(*first) + "): another drainer took them after the lease expired";
}

std::string rows_held(const std::vector<std::int64_t>& held) {
  return std::to_string(held.size()) + " rows (first id " + std::to_string(held.front()) +
         ") are locked by another database session: their outcomes wait for it to end its "
         "transaction; the other rows go on";
}

std::string subscribers_held(const std::vector<std::int64_t>& held) {
  std::string list;
  for (std::size_t i = 0; i < held.size() && i < 10; ++i) {
    list += (i ? "," : "") + std::to_string(held[i]);
  }
  return "subscriber" + std::string(held.size() == 1 ? " " : "s ") + list +
         (held.size() > 10 ? ",..." : "") +
         ": the subscriber row is locked by another database session (an open transaction), so "
         "its bucket cannot be spent and nothing is sent to it until that ends; the other "
         "subscribers go on";
}

std::string bucket_repaired(std::int64_t subscriber, const std::string& repaired) {
  return "subscriber " + std::to_string(subscriber) +
         ": its persisted token bucket no drainer could have written was repaired (" + repaired +
         "): read as stamped now and written back, so it sends again (a host's clock ahead, or "
         "another program's bad write)";
}

std::string dead_lettered(std::int64_t delivery_id, const std::string& reason) {
  return "row " + std::to_string(delivery_id) + ": " + reason +
         "; dead-lettered with that reason (`surge dead list`)";
}

std::string quarantined(std::int64_t delivery_id, const std::string& reason) {
  return "row " + std::to_string(delivery_id) + ": " + reason +
         "; even a dead-letter was refused, so the row is quarantined: this drain never claims "
         "or sends it again, and it stays in the queue as it was (its lease ends on its own)";
}

std::string ownership_lost(const std::vector<std::int64_t>& lost) {
  return "lost ownership of " + std::to_string(lost.size()) + " subscribers (first " +
         std::to_string(lost.front()) +
         "): another drainer took them over after this drain missed its renewals";
}

std::string orphans_dead_lettered(std::int64_t orphans) {
  return "dead-lettered " + std::to_string(orphans) + " rows of unknown subscribers";
}

std::string malformed_dead_lettered(const storage::malformed_rows& found) {
  return "dead-lettered " + std::to_string(found.total()) +
         " rows no claim could ever match (next_attempt_at not a number: " +
         std::to_string(found.next_attempt_at) +
         ", locked_until not a number: " + std::to_string(found.locked_until) +
         ", locked_until beyond any lease: " + std::to_string(found.far_lease) +
         "); last_error says which, `surge dead replay` puts them back";
}

}  // namespace surge::engine::notice
