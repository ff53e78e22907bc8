#include "engine/limits/origin_limit.hpp"

#include <algorithm>
#include <cmath>

namespace surge::engine {

namespace {
concurrency_window_config window_config(const origin_limit_config& config) {
  return {.initial = config.initial,
          .minimum = config.minimum,
          .window = config.window,
          .growth = config.growth};
}
}  // namespace

origin_limit::origin_limit(origin_limit_config config, time_point now)
    : config_(config), window_(window_config(config), now), period_start_(now) {}

origin_limit::duration origin_limit::best_latency() const {
  return std::min(best_current_, best_previous_);
}

origin_limit::duration origin_limit::by_best() const {
  return std::chrono::duration_cast<duration>(best_latency() * config_.latency_tolerance) +
         config_.latency_slack;
}

bool origin_limit::measured_a_queue(const usual_measure& measure) const {
  const auto best = best_latency();
  if (best == duration::max() || measure.fastest == duration::max()) return false;
  return measure.fastest > std::chrono::duration_cast<duration>(best * config_.latency_tolerance);
}

bool origin_limit::sample_measured_a_queue() const { return measured_a_queue(usual_); }

origin_limit::duration origin_limit::usual_latency() const {
  // The higher of the last two: of a partner answering in 50 and 500 ms by turns, 1 sample in
  // 90 comes out below 250 ms (1 in 30 of 8 answers), and judged by it, half of its answers
  // would read as queued at its origin and in its shard. Two in a row: about 1 in 8,000 (900).
  const bool before_counts =
      usual_before_.fastest != duration::max() && !measured_a_queue(usual_before_);
  return before_counts ? std::max(usual_.latency, usual_before_.latency) : usual_.latency;
}

bool origin_limit::judged_by_usual() const {
  const auto best = best_latency();
  if (best == duration::max()) return false;
  // At an origin answering faster than the slack, the slack governs: the spread of its answers
  // is this process's own noise. A sample whose fastest answer is beyond tolerance x best
  // measured a queue (many origins starting at once on a busy CPU), not the partner.
  if (best < config_.latency_slack || sample_measured_a_queue()) return false;
  return usual_latency() * config_.latency_tolerance > by_best();
}

origin_limit::duration origin_limit::acceptable_latency() const {
  if (best_latency() == duration::max()) return duration::max();
  if (judged_by_usual()) {
    return std::chrono::duration_cast<duration>(usual_latency() * config_.latency_tolerance);
  }
  return by_best();
}

void origin_limit::on_latency(duration latency, time_point now, const ticket& started) {
  if (!enabled()) return;
  if (started.sampled) {
    // A member that hung counts as overdue, not with its whole wait.
    const double taken = std::chrono::duration<double>(std::min(latency, overdue_after())).count();
    sample_.fastest = std::min(sample_.fastest, latency);
    sample_.sum += taken;
    sample_.sum_of_squares += taken * taken;
    ++sample_.answered;
  }
  if (now - period_start_ >= config_.best_latency_period) {
    best_previous_ = best_current_;
    best_current_ = duration::max();
    period_start_ = now;
  }
  best_current_ = std::min(best_current_, latency);
  window_sum_ += latency;
  ++window_samples_;
  if (window_.over(now)) end_window(now);
}

void origin_limit::end_window(time_point now) {
  using seconds = std::chrono::duration<double>;
  // Queueing: shrink in proportion to how far the average is above the acceptable latency.
  const double average = seconds(window_sum_).count() / window_samples_;
  const double acceptable = seconds(acceptable_latency()).count();
  window_.end(average > acceptable ? acceptable / average : 1.0, now);
  window_sum_ = duration::zero();
  window_samples_ = 0;
}

origin_limit::ticket origin_limit::on_start(time_point now) {
  // After a sample that measured a queue, the next is taken whatever is in flight: subscribers
  // that may each keep a request out can hold an origin above unqueued_below for good, and the
  // retake is judged by the same rule (its fastest answer within tolerance x best).
  const bool sampled =
      sample_.started < config_.usual_latency_samples &&
      (sample_measured_a_queue() || counted_in_flight(now) < config_.unqueued_below);
  if (sampled) ++sample_.started;
  return {.filed = started_.add(now), .sampled = sampled};
}

void origin_limit::on_end(const ticket& started) {
  started_.remove(started.filed);
  if (started.sampled) end_sample_member();
}

void origin_limit::end_sample_member() {
  ++sample_.ended;
  // Complete once every member ended, all of them taken together. Members that failed before an
  // answer say nothing; too few answers wait for more members, up to the sample's size.
  if (sample_.ended < sample_.started) return;
  if (sample_.answered >= config_.usual_latency_answers) {
    const bool was_judged_by_usual = judged_by_usual();
    // The mean plus two standard errors: a few answers of a partner that varies widely leave
    // its mean uncertain (16 of 50 ms and 500 ms by turns: 275 +- 56 ms), and that uncertainty
    // must not read as queueing. A partner that answers alike gets its mean.
    const double n = sample_.answered;
    const double mean = sample_.sum / n;
    const double variance =
        n > 1 ? std::max(0.0, (sample_.sum_of_squares - n * mean * mean) / (n - 1)) : 0.0;
    usual_before_ = usual_;
    usual_ = {.latency = std::chrono::duration_cast<duration>(
                  std::chrono::duration<double>(mean + 2 * std::sqrt(variance / n))),
              .fastest = sample_.fastest};
    sample_ = {};
    // Typically the origin's first sample: its fast answers came first, the slow ones read as
    // queueing against the best, and the limit shrank for them.
    if (!was_judged_by_usual && judged_by_usual()) window_.resume_slow_start();
  } else if (sample_.started >= config_.usual_latency_samples) {
    sample_ = {};
  }
}

origin_limit::duration origin_limit::overdue_after() const {
  const auto best = best_latency();
  if (best == duration::max()) return config_.overdue_unknown;
  const auto scaled = std::chrono::duration_cast<duration>(best * config_.overdue_factor);
  return std::max<duration>(scaled, config_.overdue_floor);
}

int origin_limit::counted_in_flight(time_point now) const {
  // Attempts that started before now - overdue_after are overdue and not counted.
  return started_.count_from(now - overdue_after());
}

origin_limit::time_point origin_limit::next_recount_at(time_point now) const {
  const auto end = started_.first_bucket_end_from(now - overdue_after());
  if (end == time_point::max()) return end;
  // The bucket after it starts is when all of its attempts are overdue.
  return end + overdue_after();
}

}  // namespace surge::engine
