#pragma once
// Samples the queue for the metrics the alert rules need (rows queued and overdue, per
// subscriber) on its own thread and read-only connection, every few seconds: a scrape never
// waits on SQLite, and the storage thread's claims and writes never wait on the sample.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "engine/observe/metrics.hpp"
#include "proto/id_set.hpp"
#include "storage/queue_shape.hpp"

namespace surge::engine {

struct queue_sampler_config {
  std::string db_path;
  std::optional<storage::queue_shape> shape;
  proto::id_set subscribers;
  std::chrono::milliseconds interval{5000};
  // A row due for longer than this counts as overdue: the "we are behind" number.
  std::chrono::seconds overdue_after{60};
};

// The wait before the next sample: the interval, or 50 times what the last sample took when
// that is longer, so that on a huge queue the sampler (which runs whenever the status line,
// the progress lines or the metrics show the partners) never costs more than 2 % of a core.
inline constexpr int sample_share = 50;
std::chrono::milliseconds sample_wait(std::chrono::milliseconds interval,
                                      std::chrono::steady_clock::duration took);

// One sample, on a connection of its own; throws storage::error when the queue cannot be read.
drain_metrics::queue_view sample_queue(const queue_sampler_config& config);

class queue_sampler {
 public:
  queue_sampler(queue_sampler_config config, drain_metrics& metrics);
  ~queue_sampler();
  queue_sampler(const queue_sampler&) = delete;
  queue_sampler& operator=(const queue_sampler&) = delete;

 private:
  void run();

  queue_sampler_config config_;
  drain_metrics& metrics_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace surge::engine
