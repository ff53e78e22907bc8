#pragma once
// Prometheus metrics of a drain (engine/observe/metrics_text renders them). Hot-path updates are
// relaxed atomic adds; per-subscriber series are published by each shard once a second as a
// snapshot, so a scrape never touches a shard's state and 10,000 subscribers cost only the top N
// series.
#include <array>
#include <chrono>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/observe/counters.hpp"
#include "engine/observe/partner_view.hpp"
#include "engine/observe/snapshots.hpp"

namespace surge::engine {

class histogram {
 public:
  explicit histogram(std::vector<double> upper_bounds);
  void observe(double value);

  struct snapshot {
    std::vector<double> bounds;
    std::vector<std::uint64_t> cumulative;  // per bound, then +Inf last
    double sum = 0;
  };
  snapshot read() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_;  // bounds_.size() + 1
  std::atomic<double> sum_{0};
};

enum class attempt_class : std::size_t { s2xx, s3xx, s4xx, s429, s5xx, transport, count };

struct drain_metrics {
  explicit drain_metrics(std::size_t shards = 1);

  drain_counters counters;
  std::array<std::atomic<std::int64_t>, static_cast<std::size_t>(attempt_class::count)>
      attempts_by_class{};
  std::atomic<std::int64_t> open_connections{0};
  std::atomic<std::int64_t> tls_handshakes_full{0};
  std::atomic<std::int64_t> tls_handshakes_resumed{0};  // an earlier connection's session
  std::atomic<double> token_wait_seconds{0};
  std::atomic<double> oldest_due_age{0};
  histogram attempt_duration;  // seconds
  histogram due_lag;           // seconds from due to first attempt
  histogram claim_rows;
  histogram claim_duration;
  histogram commit_rows;
  histogram commit_duration;

  // Per-shard gauges and top subscribers, replaced wholesale once a second by each shard.
  struct shard_view {
    std::int64_t paused_subscribers = 0;
    std::int64_t failing_subscribers = 0;
    std::int64_t open_circuits = 0;
    std::int64_t quota_paced = 0;  // paced below their limit by their partner's announced quota
    // Requests in flight the shard's adaptive limit admits now (engine/limits/shard_limit).
    std::int64_t in_flight_limit = 0;
    std::vector<held_subscriber> held;
    std::vector<subscriber_snapshot> subscribers;
    std::vector<origin_snapshot> origins;  // those with a subscriber or a request in flight
  };
  void publish(std::size_t shard, shard_view view);

  // Rows still to deliver, sampled from the queue every few seconds
  // (engine/storage_thread/queue_sampler).
  struct queue_view {
    std::int64_t overdue_rows = 0;
    std::vector<queued_snapshot> subscribers;
  };
  void publish_queue(queue_view view);
  std::vector<held_subscriber> held_subscribers() const;
  // The operator's per-partner view (engine/observe/partner_view) of the latest snapshots.
  std::vector<partner_row> partners() const;
  // Each partner host as the shards last saw it, merged (engine/observe/origin_series).
  std::vector<origin_snapshot> origins() const;
  bool queue_sampled() const;

  // Rows older than this are dead-lettered (the drain's retry rules): the alerts compare the
  // partners' ETAs with it.
  std::atomic<double> retry_max_age_seconds{0};

  void count_attempt(int status);  // 0: transport failure

  // Liveness for /healthz: the storage thread beats after each successful database operation,
  // each shard from its flush timer. A shard's core passes the time of its event, which its
  // reactor read from the steady clock, so the core reads no clock itself.
  void beat_storage();
  void beat_shard(std::size_t shard, std::chrono::steady_clock::time_point now);
  // Empty when every beat is recent, else why not.
  std::string unhealthy_reason(std::chrono::steady_clock::duration storage_max_age,
                               std::chrono::steady_clock::duration shard_max_age) const;

  // The shards' latest snapshots, and the queue's latest sample (none before the first), as
  // engine/observe/metrics_text renders them.
  std::vector<shard_view> shard_views() const;
  std::optional<queue_view> queue() const;

 private:
  partner_inputs inputs() const;

  mutable std::mutex views_mutex_;
  std::vector<shard_view> views_;
  std::optional<queue_view> queue_view_;  // none until the first sample (or without a sampler)
  std::atomic<std::int64_t> storage_beat_{0};
  std::vector<std::unique_ptr<std::atomic<std::int64_t>>> shard_beats_;
};

void add_to(std::atomic<double>& target, double value);

}  // namespace surge::engine
