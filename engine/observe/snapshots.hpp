#pragma once
// What each shard and the queue sampler publish about the subscribers, once a second or every
// few seconds: plain data, read by the metrics and the partner view.
#include <cstdint>
#include <optional>
#include <string>

namespace surge::engine {

// What a subscriber's partner last announced of its quota (engine/limits/partner_quota), and the
// pace the drain keeps to because of it.
struct announced_snapshot {
  std::optional<double> quota;           // q, or X-RateLimit-Limit, when announced
  std::optional<double> window_seconds;  // the policy's w, when announced
  double remaining = 0;                  // units left until the reset
  double reset_in = 0;                   // seconds until the reset
  bool paced = false;                    // paced below the configured limit because of it
  double paced_rate = 0;  // requests per second in force (the configured rate when not)
};

struct subscriber_snapshot {
  std::int64_t id = 0;
  std::int64_t delivered = 0;
  std::int64_t failed = 0;
  std::int64_t in_flight = 0;
  std::int64_t buffered = 0;
  double rate_limit = 0;
  bool paused = false;
  double delivery_latency_sum = 0;  // seconds from created_at to the 2xx, over `delivered` rows
  std::optional<announced_snapshot> announced;  // none until its partner announces a quota
  // What the partner view (engine/observe/partner_view) needs besides the counts.
  bool active = true;        // false: disabled, or deactivated by a 410
  bool disowned = false;     // another drain owns it now
  double paced_rate = 0;     // requests per second in force: the limit, less pushback and quota
  int rows_per_request = 1;  // a batching partner takes up to this many rows per request
  bool slowed = false;       // 429/503 answers lowered the pace below the limit
  double achieved_rate = 0;  // rows delivered per second, smoothed
  std::optional<double> circuit_open_since_unix;  // while the circuit is open or probing
  std::string last_error;                         // the last failed attempt's reason, if any
  double last_error_unix = 0;
};

// A subscriber that cannot send now, and why: behind a circuit that stays open, unusable
// credentials, a refused target, or a pause (Retry-After, its partner's announced quota).
struct held_subscriber {
  std::int64_t id = 0;
  // refused_target, credentials, deactivated, circuit_open or paused: a metric label
  std::string kind;
  std::string reason;     // for people: the log's words
  double until_unix = 0;  // when it may send again; 0: not by itself (an operator must act)
  friend bool operator==(const held_subscriber&, const held_subscriber&) = default;
};

// One host:port as a shard's adaptive concurrency limit sees it (engine/limits/origin_limit):
// what it is sent, what it may be sent, and the latencies that decide it.
struct origin_snapshot {
  std::string origin;  // "scheme://host:port"
  std::int64_t subscribers = 0;
  double rate_limit = 0;  // its subscribers' configured requests per second together
  std::int64_t in_flight = 0;
  std::int64_t limit = 0;  // the adaptive limit (0: the limit is off)
  // Its subscribers' rates x its acceptable latency, plus 4 (scheduling::origin_need_ceiling);
  // none before a latency is known, for rates without bound, or with the limit off.
  std::optional<std::int64_t> need;
  // Subscribers with a row ready that wait: for this origin's limit or need, or for a slot of
  // the shard's in-flight limit.
  std::int64_t waiting_for_origin = 0;
  std::int64_t waiting_for_shard = 0;
  // Seconds; none until measured (the usual latency: until a sample of unqueued requests ended).
  std::optional<double> best_latency;
  std::optional<double> usual_latency;
  std::optional<double> acceptable_latency;  // above it, a request counts as queued
  bool judged_by_usual = false;  // the usual latency, not the best, sets the acceptable one
};

struct queued_snapshot {
  std::int64_t id = 0;
  std::int64_t queued = 0;
  std::int64_t overdue = 0;
};

}  // namespace surge::engine
