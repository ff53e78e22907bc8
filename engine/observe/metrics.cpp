#include "engine/observe/metrics.hpp"

#include <algorithm>

#include "engine/observe/origin_series.hpp"

namespace surge::engine {

namespace {

std::vector<double> seconds_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
}

std::vector<double> row_buckets() { return {1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500}; }

}  // namespace

void add_to(std::atomic<double>& target, double value) {
  target.fetch_add(value, std::memory_order_relaxed);
}

histogram::histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)),
      buckets_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1)) {}

void histogram::observe(double value) {
  const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), value);
  buckets_[static_cast<std::size_t>(it - bounds_.begin())].fetch_add(1, std::memory_order_relaxed);
  add_to(sum_, value);
}

histogram::snapshot histogram::read() const {
  snapshot out;
  out.bounds = bounds_;
  std::uint64_t running = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    out.cumulative.push_back(running);
  }
  out.sum = sum_.load(std::memory_order_relaxed);
  return out;
}

drain_metrics::drain_metrics(std::size_t shards)
    : attempt_duration(seconds_buckets()),
      due_lag(seconds_buckets()),
      claim_rows(row_buckets()),
      claim_duration(seconds_buckets()),
      commit_rows(row_buckets()),
      commit_duration(seconds_buckets()) {
  for (std::size_t i = 0; i < shards; ++i) {
    shard_beats_.push_back(std::make_unique<std::atomic<std::int64_t>>(0));
  }
  beat_storage();
  const auto now = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < shards; ++i) beat_shard(i, now);
}

namespace {
std::int64_t steady_ticks() { return std::chrono::steady_clock::now().time_since_epoch().count(); }
}  // namespace

void drain_metrics::beat_storage() {
  storage_beat_.store(steady_ticks(), std::memory_order_relaxed);
}

void drain_metrics::beat_shard(std::size_t shard, std::chrono::steady_clock::time_point now) {
  if (shard < shard_beats_.size()) {
    shard_beats_[shard]->store(now.time_since_epoch().count(), std::memory_order_relaxed);
  }
}

std::string drain_metrics::unhealthy_reason(
    std::chrono::steady_clock::duration storage_max_age,
    std::chrono::steady_clock::duration shard_max_age) const {
  const auto now = steady_ticks();
  if (now - storage_beat_.load(std::memory_order_relaxed) > storage_max_age.count()) {
    return "database not reachable";
  }
  for (std::size_t i = 0; i < shard_beats_.size(); ++i) {
    if (now - shard_beats_[i]->load(std::memory_order_relaxed) > shard_max_age.count()) {
      return "shard " + std::to_string(i) + " not responding";
    }
  }
  return {};
}

void drain_metrics::count_attempt(int status) {
  attempt_class kind = attempt_class::transport;
  if (status == 429) {
    kind = attempt_class::s429;
  } else if (status >= 200 && status < 300) {
    kind = attempt_class::s2xx;
  } else if (status >= 300 && status < 400) {
    kind = attempt_class::s3xx;
  } else if (status >= 400 && status < 500) {
    kind = attempt_class::s4xx;
  } else if (status >= 500) {
    kind = attempt_class::s5xx;
  }
  attempts_by_class[static_cast<std::size_t>(kind)].fetch_add(1, std::memory_order_relaxed);
}

void drain_metrics::publish(std::size_t shard, shard_view view) {
  std::lock_guard lock(views_mutex_);
  if (views_.size() <= shard) views_.resize(shard + 1);
  views_[shard] = std::move(view);
}

partner_inputs drain_metrics::inputs() const {
  partner_inputs in;
  std::lock_guard lock(views_mutex_);
  for (const auto& view : views_) {
    in.subscribers.insert(in.subscribers.end(), view.subscribers.begin(), view.subscribers.end());
    in.held.insert(in.held.end(), view.held.begin(), view.held.end());
  }
  if (queue_view_) in.queued = queue_view_->subscribers;
  return in;
}

std::vector<partner_row> drain_metrics::partners() const { return partner_rows(inputs()); }

std::vector<origin_snapshot> drain_metrics::origins() const {
  std::vector<origin_snapshot> per_shard;
  {
    std::lock_guard lock(views_mutex_);
    for (const auto& view : views_) {
      per_shard.insert(per_shard.end(), view.origins.begin(), view.origins.end());
    }
  }
  return merge_origins(per_shard);
}

bool drain_metrics::queue_sampled() const {
  std::lock_guard lock(views_mutex_);
  return queue_view_.has_value();
}

std::vector<held_subscriber> drain_metrics::held_subscribers() const {
  std::lock_guard lock(views_mutex_);
  std::vector<held_subscriber> out;
  for (const auto& view : views_) out.insert(out.end(), view.held.begin(), view.held.end());
  return out;
}

void drain_metrics::publish_queue(queue_view view) {
  std::lock_guard lock(views_mutex_);
  queue_view_ = std::move(view);
}

std::vector<drain_metrics::shard_view> drain_metrics::shard_views() const {
  std::lock_guard lock(views_mutex_);
  return views_;
}

std::optional<drain_metrics::queue_view> drain_metrics::queue() const {
  std::lock_guard lock(views_mutex_);
  return queue_view_;
}

}  // namespace surge::engine
