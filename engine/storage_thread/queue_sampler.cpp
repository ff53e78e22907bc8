#include "engine/storage_thread/queue_sampler.hpp"

#include <pthread.h>

#include <algorithm>
#include <exception>

#include "engine/observe/log.hpp"
#include "proto/clock.hpp"
#include "storage/backlog.hpp"

namespace surge::engine {

std::chrono::milliseconds sample_wait(std::chrono::milliseconds interval,
                                      std::chrono::steady_clock::duration took) {
  return std::max(interval,
                  std::chrono::duration_cast<std::chrono::milliseconds>(took * sample_share));
}

drain_metrics::queue_view sample_queue(const queue_sampler_config& config) {
  storage::connection db({.location = config.db_path,
                          .create_if_missing = false,
                          .read_only = true,
                          .shape = config.shape});
  const double overdue_before =
      proto::unix_now() - static_cast<double>(config.overdue_after.count());
  drain_metrics::queue_view view;
  for (const auto& s : storage::backlog_by_subscriber(db, overdue_before, config.subscribers)) {
    view.overdue_rows += s.overdue;
    view.subscribers.push_back({.id = s.subscriber_id, .queued = s.queued, .overdue = s.overdue});
  }
  return view;
}

queue_sampler::queue_sampler(queue_sampler_config config, drain_metrics& metrics)
    : config_(std::move(config)), metrics_(metrics), thread_([this] { run(); }) {}

queue_sampler::~queue_sampler() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void queue_sampler::run() {
  pthread_setname_np(pthread_self(), "surge-sampler");
  bool warned = false;
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    auto wait = config_.interval;
    try {
      const auto started = std::chrono::steady_clock::now();
      metrics_.publish_queue(sample_queue(config_));
      wait = sample_wait(config_.interval, std::chrono::steady_clock::now() - started);
      warned = false;
    } catch (const std::exception& error) {
      // The storage thread reports database trouble and /healthz shows it; one line here.
      if (!warned) log_warn(std::string("sampling the queue for metrics failed: ") + error.what());
      warned = true;
    }
    lock.lock();
    wake_.wait_for(lock, wait, [this] { return stopping_; });
  }
}

}  // namespace surge::engine
