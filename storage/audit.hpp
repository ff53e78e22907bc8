#pragma once
// Rate-limit conformance from the surge_attempt table (`surge audit`): the
// pure computations, and reading the table per subscriber.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "proto/id_set.hpp"
#include "storage/connection.hpp"

namespace surge::storage {

struct attempt_sample {
  double started_at = 0;
  double finished_at = 0;
  int status_code = 0;    // 0: no response
  std::int64_t rows = 1;  // queue rows the request carried (a batch POST carries several)
};

struct audit_limit {
  double rate_per_sec = 0;
  std::int64_t burst = 0;
  bool active = true;
};

struct subscriber_audit {
  std::int64_t subscriber_id = 0;
  std::optional<audit_limit> limit;  // nullopt: the subscriber no longer exists
  // Requests (a batch POST counts once: the partner's limit is about requests) and the queue
  // rows they carried.
  std::int64_t attempts = 0;
  std::int64_t rows = 0;
  std::int64_t successes = 0;  // 2xx answers
  double first_started_at = 0;
  double last_started_at = 0;
  std::int64_t max_per_1s = 0;   // most attempts started within any 1 s window
  std::int64_t max_per_60s = 0;  // ... within any 60 s window
  double allowed_per_1s = 0;     // burst + rate * T + 1, when there is a limit
  double allowed_per_60s = 0;
  // The window of any length whose attempts most exceed burst + rate * T + 1 (checking every
  // window, not only 1 s and 60 s ones: a sustained excess over 10 s hides in both): its
  // length, its attempts, and attempts minus allowance (<= 0 when the subscriber conforms).
  double worst_window_seconds = 0;
  std::int64_t worst_window_count = 0;
  double worst_window_excess = 0;
  bool violation = false;  // some window above its allowance
  // (attempts - burst) / (last start - first start): the rate sustained once the first burst
  // is spent, taking the whole span as backlogged. Set only with more than `burst` attempts
  // spread over a positive span.
  std::optional<double> achieved_rate;
  // Nearest-rank percentiles of finished_at - started_at, in seconds; 0 without attempts.
  double latency_p50 = 0, latency_p90 = 0, latency_p99 = 0;
};

// The most values of `sorted` within any half-open window [t, t + window).
std::int64_t max_in_window(std::span<const double> sorted, double window);

// Nearest-rank percentile (`p` in 0..100) of ascending `sorted`: the smallest value with at
// least p % of the values at or below it. 0 for no values.
double nearest_rank(std::span<const double> sorted, double p);

// What a subscriber may receive in any window of `window` seconds.
double allowed_in_window(const audit_limit& limit, double window);

struct window_excess {
  double seconds = 0;
  std::int64_t count = 0;
  double excess = 0;
};

// Over every window [t_i, t_j] of ascending `sorted` starts, the one maximising
// count - (burst + rate * (t_j - t_i) + 1), found in one pass: count - allowance equals
// (j - rate t_j) - (i - rate t_i) - burst, so each j pairs with the smallest i - rate t_i so far.
window_excess worst_window(std::span<const double> sorted, const audit_limit& limit);

// The audit of one subscriber's attempts, in any order.
subscriber_audit audit_attempts(std::int64_t subscriber_id,
                                std::span<const attempt_sample> attempts,
                                const std::optional<audit_limit>& limit);

// Attempts per whole Unix second of started_at, ascending, seconds without any left out: those
// answered 2xx, and the others (any other status, or no answer), so that a partner failing
// everything is not taken for an idle one.
struct second_answers {
  std::int64_t second = 0;
  std::int64_t delivered = 0;
  std::int64_t failed = 0;
};
std::vector<second_answers> answers_per_second(std::span<const attempt_sample> attempts);

struct audit_entry {
  subscriber_audit summary;
  std::vector<second_answers> answers;  // filled only when asked for
};

// Turns attempts read in (subscriber, started_at) order into one entry per subscriber, so that
// each backend only reads: memory follows the busiest subscriber, not the table.
class audit_collector {
 public:
  audit_collector(std::map<std::int64_t, audit_limit> limits, bool with_delivered)
      : limits_(std::move(limits)), with_delivered_(with_delivered) {}
  void add(std::int64_t subscriber_id, const attempt_sample& sample);
  std::vector<audit_entry> finish();

 private:
  void flush();

  std::map<std::int64_t, audit_limit> limits_;
  bool with_delivered_;
  std::int64_t current_ = 0;
  std::vector<attempt_sample> samples_;
  std::vector<audit_entry> out_;
};

// On either kind of queue (storage/connection.hpp), as storage/sqlite/audit.hpp describes them on a
// SQLite file; throws storage::error.
std::vector<audit_entry> read_audit(connection& db, const proto::id_set& which = {},
                                    bool with_delivered = false);

}  // namespace surge::storage
