#pragma once
// What the storage thread counts and says about what the database did: the write reports, the
// locks another session holds, repaired buckets, dead-lettered and quarantined rows, sweeps,
// ownership lost, failures. The words are storage_notices'; the rules here are when a line is
// said (once per subscriber, or the first time and then at most every so often) and which counter
// a fact moves. The storage core decides what happened; this only reports it.
#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "engine/observe/counters.hpp"
#include "engine/observe/log.hpp"
#include "storage/cycle.hpp"
#include "storage/error.hpp"
#include "storage/maintenance.hpp"
#include "storage/outcomes.hpp"

namespace surge::engine {

// A warning about a condition that may last or come and go: said the first time, then at most
// every `every`, so a log is not flooded by one warning per storage cycle or retry.
class repeated_warning {
 public:
  explicit repeated_warning(std::chrono::steady_clock::duration every) : every_(every) {}
  bool due(std::chrono::steady_clock::time_point now) {
    if (active_ && now - last_ < every_) return false;
    active_ = true;
    last_ = now;
    return true;
  }

 private:
  std::chrono::steady_clock::duration every_;
  bool active_ = false;
  std::chrono::steady_clock::time_point last_{};
};

class storage_reporter {
 public:
  using clock = std::chrono::steady_clock;

  // `repeat_every`: how often a lasting condition (rows or subscribers another session holds
  // locked) is said again.
  storage_reporter(drain_counters& counters, core_log& log, clock::duration repeat_every);

  // A write's report: keys stopped by a dead row, leases lost to deletion or to another drainer.
  void written(const storage::write_report& report);
  // Outcomes wait because another session holds their rows (report.held_rows is not empty).
  void rows_held(clock::time_point now, const storage::write_report& report);
  // A claim could not take these subscribers' tokens: another session holds their rows.
  void subscribers_held(clock::time_point now, const std::vector<std::int64_t>& held);
  // A claim's grants: a bucket the database found broken and repaired is said once per subscriber.
  void granted(const std::vector<storage::token_grant>& grants);
  void dead_lettered(std::int64_t delivery_id, const std::string& reason);
  void quarantined(std::int64_t delivery_id, const std::string& reason);
  void refused_outcome() { counters_.add(counters_.refused_outcomes); }
  void swept(std::int64_t orphans, const storage::malformed_rows& found);
  void ownership_lost(const std::vector<std::int64_t>& lost);
  // A storage failure the drain outlasts: counted, and said with `what` before its cause.
  void failure(log_level level, const std::string& what, const storage::error& error);
  void say(log_level level, std::string message) { log_.write(level, std::move(message)); }

 private:
  drain_counters& counters_;
  core_log& log_;
  repeated_warning held_rows_;
  repeated_warning held_subscribers_;
  std::unordered_set<std::int64_t> repairs_said_;  // subscribers whose bucket repair was said
};

}  // namespace surge::engine
