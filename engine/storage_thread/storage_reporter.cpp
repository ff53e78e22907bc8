#include "engine/storage_thread/storage_reporter.hpp"

#include "engine/storage_thread/storage_notices.hpp"

namespace surge::engine {

storage_reporter::storage_reporter(drain_counters& counters, core_log& log,
                                   clock::duration repeat_every)
    : counters_(counters), log_(log), held_rows_(repeat_every), held_subscribers_(repeat_every) {}

void storage_reporter::written(const storage::write_report& report) {
  for (const auto& stopped : report.keys_stopped) {
    counters_.add(counters_.keys_stopped);
    say(log_level::warn, notice::key_stopped(stopped));
  }
  if (report.lost_leases.empty()) return;
  counters_.add(counters_.lost_leases, static_cast<std::int64_t>(report.lost_leases.size()));
  if (auto deleted = notice::deleted_in_flight(report)) say(log_level::warn, std::move(*deleted));
  if (auto taken = notice::leases_taken(report)) say(log_level::warn, std::move(*taken));
}

void storage_reporter::rows_held(clock::time_point now, const storage::write_report& report) {
  // An empty report does not end the episode: held rows are retried between writes that hold
  // none, and the warning would come at every retry.
  if (held_rows_.due(now)) say(log_level::warn, notice::rows_held(report.held_rows));
}

void storage_reporter::subscribers_held(clock::time_point now,
                                        const std::vector<std::int64_t>& held) {
  // A cycle that did not ask for the held subscribers' tokens does not end the episode.
  if (held.empty() || !held_subscribers_.due(now)) return;
  say(log_level::warn, notice::subscribers_held(held));
}

void storage_reporter::granted(const std::vector<storage::token_grant>& grants) {
  for (const auto& grant : grants) {
    // Once per drain and subscriber: a writer that keeps writing such buckets would otherwise
    // fill the log with one line per cycle.
    if (!grant.repaired.empty() && repairs_said_.insert(grant.subscriber_id).second) {
      say(log_level::warn, notice::bucket_repaired(grant.subscriber_id, grant.repaired));
    }
  }
}

void storage_reporter::dead_lettered(std::int64_t delivery_id, const std::string& reason) {
  counters_.add(counters_.dead);
  say(log_level::error, notice::dead_lettered(delivery_id, reason));
}

void storage_reporter::quarantined(std::int64_t delivery_id, const std::string& reason) {
  say(log_level::error, notice::quarantined(delivery_id, reason));
}

void storage_reporter::swept(std::int64_t orphans, const storage::malformed_rows& found) {
  if (orphans > 0) {
    counters_.add(counters_.dead, orphans);
    say(log_level::warn, notice::orphans_dead_lettered(orphans));
  }
  if (found.total() > 0) {
    counters_.add(counters_.dead, found.total());
    say(log_level::warn, notice::malformed_dead_lettered(found));
  }
}

void storage_reporter::ownership_lost(const std::vector<std::int64_t>& lost) {
  if (!lost.empty()) say(log_level::warn, notice::ownership_lost(lost));
}

void storage_reporter::failure(log_level level, const std::string& what,
                               const storage::error& error) {
  counters_.add(counters_.storage_errors);
  say(level, what + error.what());
}

}  // namespace surge::engine
