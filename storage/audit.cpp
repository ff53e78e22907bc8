#include "storage/audit.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace surge::storage {

std::int64_t max_in_window(std::span<const double> sorted, double window) {
  std::int64_t best = 0;
  std::size_t first = 0;
  for (std::size_t last = 0; last < sorted.size(); ++last) {
    while (sorted[last] - sorted[first] >= window) ++first;
    best = std::max(best, static_cast<std::int64_t>(last - first + 1));
  }
  return best;
}

double nearest_rank(std::span<const double> sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  const auto index = static_cast<std::size_t>(std::max(rank, 1.0)) - 1;
  return sorted[std::min(index, sorted.size() - 1)];
}

double allowed_in_window(const audit_limit& limit, double window) {
  // The + 1 is the brief's allowance for clock granularity at the window edges.
  return static_cast<double>(limit.burst) + limit.rate_per_sec * window + 1;
}

window_excess worst_window(std::span<const double> sorted, const audit_limit& limit) {
  window_excess worst;
  if (sorted.empty()) return worst;
  // Relative times keep rate * t small enough for doubles to stay exact to well below 1e-6.
  const double origin = sorted.front();
  double min_value = 0;
  std::size_t min_index = 0;
  for (std::size_t j = 0; j < sorted.size(); ++j) {
    const double value = static_cast<double>(j) - limit.rate_per_sec * (sorted[j] - origin);
    if (j == 0 || value < min_value) {
      min_value = value;
      min_index = j;
    }
    const double excess = value - min_value - static_cast<double>(limit.burst);
    if (j == 0 || excess > worst.excess) {
      worst.excess = excess;
      worst.seconds = sorted[j] - sorted[min_index];
      worst.count = static_cast<std::int64_t>(j - min_index + 1);
    }
  }
  return worst;
}

subscriber_audit audit_attempts(std::int64_t subscriber_id,
                                std::span<const attempt_sample> attempts,
                                const std::optional<audit_limit>& limit) {
  subscriber_audit out;
  out.subscriber_id = subscriber_id;
  out.limit = limit;
  out.attempts = static_cast<std::int64_t>(attempts.size());
  if (attempts.empty()) return out;

  std::vector<double> starts;
  std::vector<double> latencies;
  starts.reserve(attempts.size());
  latencies.reserve(attempts.size());
  for (const auto& a : attempts) {
    starts.push_back(a.started_at);
    latencies.push_back(a.finished_at - a.started_at);
    if (a.status_code >= 200 && a.status_code < 300) ++out.successes;
    out.rows += a.rows;
  }
  std::sort(starts.begin(), starts.end());
  std::sort(latencies.begin(), latencies.end());

  out.first_started_at = starts.front();
  out.last_started_at = starts.back();
  out.max_per_1s = max_in_window(starts, 1);
  out.max_per_60s = max_in_window(starts, 60);
  out.latency_p50 = nearest_rank(latencies, 50);
  out.latency_p90 = nearest_rank(latencies, 90);
  out.latency_p99 = nearest_rank(latencies, 99);
  if (!limit) return out;

  out.allowed_per_1s = allowed_in_window(*limit, 1);
  out.allowed_per_60s = allowed_in_window(*limit, 60);
  const auto worst = worst_window(starts, *limit);
  out.worst_window_seconds = worst.seconds;
  out.worst_window_count = worst.count;
  out.worst_window_excess = worst.excess;
  // Every window a 1 s or 60 s maximum could exceed is among those worst_window weighs; the
  // margin absorbs rounding in rate * T, never a whole request.
  constexpr double rounding = 1e-6;
  out.violation = worst.excess > rounding ||
                  static_cast<double>(out.max_per_1s) > out.allowed_per_1s + rounding ||
                  static_cast<double>(out.max_per_60s) > out.allowed_per_60s + rounding;
  const double span = out.last_started_at - out.first_started_at;
  if (out.attempts > limit->burst && span > 0) {
    out.achieved_rate = static_cast<double>(out.attempts - limit->burst) / span;
  }
  return out;
}

std::vector<second_answers> answers_per_second(std::span<const attempt_sample> attempts) {
  std::map<std::int64_t, second_answers> bins;
  for (const auto& a : attempts) {
    const auto second = static_cast<std::int64_t>(std::floor(a.started_at));
    auto& bin = bins[second];
    bin.second = second;
    ++(a.status_code >= 200 && a.status_code < 300 ? bin.delivered : bin.failed);
  }
  std::vector<second_answers> out;
  out.reserve(bins.size());
  for (const auto& [second, bin] : bins) out.push_back(bin);
  return out;
}

void audit_collector::add(std::int64_t subscriber_id, const attempt_sample& sample) {
  if (subscriber_id != current_) {
    flush();
    current_ = subscriber_id;
  }
  samples_.push_back(sample);
}

std::vector<audit_entry> audit_collector::finish() {
  flush();
  return std::move(out_);
}

void audit_collector::flush() {
  if (samples_.empty()) return;
  const auto found = limits_.find(current_);
  std::optional<audit_limit> limit;
  if (found != limits_.end()) limit = found->second;
  audit_entry& entry = out_.emplace_back();
  entry.summary = audit_attempts(current_, samples_, limit);
  if (with_delivered_) entry.answers = answers_per_second(samples_);
  samples_.clear();
}

}  // namespace surge::storage
