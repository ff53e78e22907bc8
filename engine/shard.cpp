#include "engine/shard.hpp"

#include <algorithm>
#include <cmath>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "engine/delivery.hpp"
#include "engine/log.hpp"
#include "storage/database.hpp"

namespace surge::engine {

namespace asio = boost::asio;
namespace http = boost::beast::http;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
// Rows of an unusable subscriber are claimed in batches of this size to be dead-lettered.
constexpr int unusable_claim_batch = 64;

}  // namespace

shard::shard(int index, int shard_count, const drain_config& config, storage_worker& storage,
             std::shared_ptr<asio::ssl::context> tls, drain_metrics& metrics)
    : index_(index),
      shard_count_(shard_count),
      config_(config),
      retry_policy_(config.retry),
      storage_(storage),
      metrics_(metrics),
      counters_(metrics.counters),
      work_(io_.get_executor()),
      client_(io_.get_executor(), std::move(tls), config.http, &metrics.open_connections),
      in_flight_cap_(std::max(1, config.scheduler.max_in_flight / shard_count)),
      rng_(std::random_device{}()) {}

shard::~shard() { join(); }

void shard::start() {
  asio::co_spawn(io_, demand_loop(), asio::detached);
  asio::co_spawn(io_, flush_loop(), asio::detached);
  thread_ = std::thread([this] {
    try {
      io_.run();
    } catch (const std::exception& error) {
      log_error(std::string("shard stopped by an internal error: ") + error.what());
      finished_ = true;
    }
  });
}

void shard::join() {
  if (thread_.joinable()) thread_.join();
}

void shard::on_subscribers(std::vector<storage::subscriber_row> rows) {
  asio::post(io_, [this, rows = std::move(rows)]() mutable { update_subscribers(std::move(rows)); });
}

void shard::on_claimed(claim_reply reply) {
  asio::post(io_, [this, reply = std::move(reply)]() mutable { accept_claims(std::move(reply)); });
}

void shard::begin_stop() {
  asio::post(io_, [this] {
    if (stopping_) return;
    stopping_ = true;
    for (auto& [id, sub] : subscribers_) {
      release_ready(*sub);
      sub->notify();
    }
    finish_if_quiet();
  });
}

void shard::abandon() {
  asio::post(io_, [this] {
    if (finished_) return;
    if (in_flight_ > 0) {
      log_warn("shard " + std::to_string(index_) + ": " + std::to_string(in_flight_) +
               " attempts still in flight after the grace period; their leases will expire");
    }
    finish();
    io_.stop();
  });
}

void shard::update_subscribers(std::vector<storage::subscriber_row> rows) {
  const auto now = steady::now();
  const double now_unix = storage::unix_now();
  for (auto& row : rows) {
    auto settings = derive_settings(row, config_.scheduler);
    auto it = subscribers_.find(row.id);
    if (it == subscribers_.end()) {
      auto state = std::make_unique<subscriber_state>(row, std::move(settings), io_.get_executor(),
                                                      now_unix, config_.scheduler);
      auto& sub = *state;
      order_.push_back(&sub);
      subscribers_.emplace(row.id, std::move(state));
      if (!stopping_) asio::co_spawn(io_, pump(sub), asio::detached);
    } else {
      auto& sub = *it->second;
      // New limits take effect without resetting tokens (DESIGN section 3); a rate lowered by
      // pushback stays lowered, within the new limit.
      sub.pace.reconfigure(row.rate_per_sec);
      sub.bucket.reconfigure(sub.pace.effective(), static_cast<double>(row.burst), now);
      // Queued behind another origin now: let the pump find its new one.
      const bool moved = settings.target && sub.settings.target &&
                         settings.target->origin_key != sub.settings.target->origin_key;
      if (moved) sub.waiting_on_origin = nullptr;
      sub.settings = std::move(settings);
      sub.notify();
    }
  }
}

void shard::accept_claims(claim_reply reply) {
  claim_outstanding_ = false;
  const auto now = steady::now();
  for (const auto& asked : reply.asked) {
    auto it = subscribers_.find(asked.subscriber_id);
    if (it == subscribers_.end()) continue;
    it->second->pending_claim = std::max(0, it->second->pending_claim - asked.rows);
  }
  for (const auto& asked : reply.asked) pending_total_ -= asked.rows;
  pending_total_ = std::max(0, pending_total_);
  std::unordered_map<std::int64_t, int> got;
  for (auto& row : reply.rows) {
    counters_.add(counters_.claimed);
    auto it = subscribers_.find(row.subscriber_id);
    if (it == subscribers_.end()) {
      push_outcome(outcome_for(row, storage::outcome_kind::release));
      continue;
    }
    ++got[row.subscriber_id];
    auto& sub = *it->second;
    if (stopping_) {
      push_outcome(outcome_for(row, storage::outcome_kind::release));
      continue;
    }
    sub.ready.push_back(std::move(row));
    adjust_buffered(1);
  }
  // A short answer means the subscriber has nothing more due right now: poll it less often.
  for (const auto& asked : reply.asked) {
    auto it = subscribers_.find(asked.subscriber_id);
    if (it == subscribers_.end()) continue;
    auto& sub = *it->second;
    if (got[asked.subscriber_id] < asked.rows) {
      sub.idle_poll = std::clamp(sub.idle_poll * 2, config_.scheduler.idle_poll_min,
                                 config_.scheduler.idle_poll_max);
      sub.poll_after = now + sub.idle_poll;
    } else {
      sub.idle_poll = std::chrono::milliseconds(0);
    }
    sub.notify();
  }
  // A stopping shard may have been waiting for this answer to finish.
  finish_if_quiet();
}

asio::awaitable<void> shard::demand_loop() {
  asio::steady_timer timer(io_);
  while (!stopping_) {
    timer.expires_after(config_.scheduler.demand_interval);
    co_await timer.async_wait(use_tuple);
    if (!stopping_ && !claim_outstanding_) send_demand();
  }
}

void shard::send_demand() {
  const auto now = steady::now();
  const double horizon =
      std::chrono::duration<double>(config_.scheduler.claim_horizon).count();
  std::vector<storage::subscriber_demand> demand;
  // The shard as a whole buffers at most a few rows per in-flight slot, so that under a global
  // cap no claimed row waits near its lease. The scan starts where the last budget ran out, so
  // no subscriber is always last in line.
  int budget = in_flight_cap_ * config_.scheduler.buffer_per_slot -
               buffered_ - pending_total_;
  const std::size_t count = order_.size();
  std::size_t visited = 0;
  for (; visited < count && budget > 0; ++visited) {
    auto& sub = *order_[(demand_cursor_ + visited) % count];
    const auto id = sub.settings.id;
    if (now < sub.poll_after) continue;
    const int held = static_cast<int>(sub.ready.size()) + sub.pending_claim;
    int limit = 0;
    if (!sub.settings.unusable_reason.empty()) {
      limit = unusable_claim_batch;
    } else if (sub.bucket.paused() || sub.paused_until > now) {
      continue;
    } else if (sub.breaker.blocking()) {
      // An open circuit claims nothing but the one row its probe needs.
      if (!sub.probe_due(now)) continue;
      limit = 1;
    } else {
      // Rows it can send within the horizon: tokens now plus refill, bounded by a buffer of a
      // few in-flight slots so a fast subscriber stays fed between claim rounds.
      const double sendable = std::floor(sub.bucket.tokens_at(now) + sub.bucket.rate() * horizon);
      const double buffer_cap = static_cast<double>(sub.settings.in_flight_cap) *
                                config_.scheduler.buffer_per_slot;
      limit = static_cast<int>(std::min(sendable, buffer_cap));
    }
    const int want = std::min(limit - held, budget);
    if (want <= 0) continue;
    sub.pending_claim += want;
    pending_total_ += want;
    budget -= want;
    demand.push_back({.subscriber_id = id, .rows = want});
  }
  if (count > 0) demand_cursor_ = (demand_cursor_ + visited) % count;
  if (demand.empty()) return;
  claim_outstanding_ = true;
  storage_.request_claims(index_, std::move(demand));
}

asio::awaitable<void> shard::pump(subscriber_state& sub) {
  const auto& limits = config_.scheduler;
  while (!stopping_) {
    const auto now = steady::now();
    auto wake_at = steady::time_point::max();
    if (sub.ready.empty()) {
      // Wait for rows.
    } else if (!sub.settings.unusable_reason.empty()) {
      while (!sub.ready.empty()) {
        auto row = std::move(sub.ready.front());
        sub.ready.pop_front();
        dead_letter(std::move(row), sub.settings.unusable_reason);
      }
      continue;
    } else if (sub.ready.front().payload.size() > limits.max_payload_bytes) {
      auto row = std::move(sub.ready.front());
      sub.ready.pop_front();
      const auto size = row.payload.size();
      dead_letter(std::move(row),
                  "payload too large: " + std::to_string(size) + " bytes, limit " +
                      std::to_string(limits.max_payload_bytes));
      continue;
    } else if (lease_too_short(sub.ready.front())) {
      // Sending now could outlive the lease and race another drainer for the row: give it back
      // to the queue instead; it is claimed again on the next round.
      auto row = std::move(sub.ready.front());
      sub.ready.pop_front();
      adjust_buffered(-1);
      counters_.add(counters_.released);
      push_outcome(outcome_for(row, storage::outcome_kind::release));
      continue;
    } else if (sub.paused_until > now) {
      wake_at = sub.paused_until;
    } else if (sub.breaker.blocking() && !sub.probe_due(now)) {
      // Open: wait for the probe time. Probing: wait for the probe's answer.
      if (sub.breaker.current() == circuit_breaker::state::open) wake_at = sub.breaker.next_probe_at();
    } else if (sub.in_flight >= sub.settings.in_flight_cap) {
      // Wait for one of its own attempts to finish.
    } else if (in_flight_ >= in_flight_cap_) {
      if (!sub.waiting_for_slot) {
        sub.waiting_for_slot = true;
        waiting_for_slot_.push_back(&sub);
      }
    } else if (auto& origin = origin_of(*sub.settings.target);
               !origin.limit.admits(origin.in_flight) ||
               (!sub.origin_turn && sub.in_flight > 0 && !origin.waiting.empty())) {
      // One that already has requests out queues behind those waiting, unless it is its turn:
      // otherwise the subscriber whose attempt just finished takes each freed slot back, and a
      // big backlog keeps the origin's other subscribers waiting until it is gone.
      origin.limit.note_blocked();
      if (sub.waiting_on_origin != &origin) {
        sub.waiting_on_origin = &origin;
        origin.waiting.push_back(&sub);
      }
    } else if (sub.bucket.try_take(now)) {
      sub.origin_turn = false;
      sub.breaker.try_admit(now);  // an open circuit whose probe is due becomes probing
      if (sub.token_wait_since) {
        add_to(metrics_.token_wait_seconds,
               std::chrono::duration<double>(now - *sub.token_wait_since).count());
        sub.token_wait_since.reset();
      }
      auto row = std::move(sub.ready.front());
      sub.ready.pop_front();
      adjust_buffered(-1);
      ++sub.in_flight;
      ++in_flight_;
      ++origin.in_flight;
      counters_.add(counters_.in_flight);
      asio::co_spawn(io_,
                     attempt(sub, origin, std::move(row), sub.settings.target,
                             sub.settings.signer),
                     asio::detached);
      continue;
    } else if (const auto wait = sub.bucket.time_until_available(now); wait != steady::duration::max()) {
      if (!sub.token_wait_since) sub.token_wait_since = now;
      wake_at = now + wait;
    }
    sub.wake.expires_at(wake_at);
    co_await sub.wake.async_wait(use_tuple);
  }
}

asio::awaitable<void> shard::attempt(subscriber_state& sub, origin_state& origin,
                                     storage::claimed_row row,
                                     std::shared_ptr<const proto::target> target,
                                     std::shared_ptr<const proto::signer> signer) {
  attempt_times times;
  times.started_unix = storage::unix_now();
  http_result result;
  try {
    const auto request = build_delivery_request(*target, *signer, row,
                                                static_cast<std::int64_t>(times.started_unix),
                                                config_.http.user_agent);
    result = co_await client_.send(*target, request);
  } catch (const std::exception& error) {
    result.error = proto::transport_error::protocol;
    result.detail = std::string("internal error: ") + error.what();
  }
  times.finished_unix = storage::unix_now();
  times.now = std::chrono::system_clock::now();
  // The endpoint's own latency: answered exchanges, and those that timed out waiting (with their
  // whole wait); connect and TLS time are not in it, so opening connections does not read as
  // queueing.
  const bool waited = result.status != 0 || result.error == proto::transport_error::timeout;
  if (waited && result.exchange_time > steady::duration::zero()) {
    origin.limit.on_latency(result.exchange_time, steady::now());
  }
  record_attempt(sub, row, result, times);

  const double unit = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  auto judged = judge_attempt(row, sub.settings.id, result, times, retry_policy_,
                              config_.retry_after_cap, unit);
  switch (judged.outcome.kind) {
    case storage::outcome_kind::done: counters_.add(counters_.delivered); break;
    case storage::outcome_kind::retry: counters_.add(counters_.retried); break;
    case storage::outcome_kind::dead: counters_.add(counters_.dead); break;
    case storage::outcome_kind::release: break;
  }
  if (judged.pause_subscriber) {
    const auto pause = *judged.pause_subscriber;
    sub.paused_until = std::max(sub.paused_until, steady::now() + pause);
    sub.poll_after = std::max(sub.poll_after, sub.paused_until);
    if (pause >= config_.scheduler.pause_release_threshold) {
      reschedule_ready(sub, times.finished_unix + std::chrono::duration<double>(pause).count(),
                       "subscriber paused by Retry-After");
    }
  }
  if (judged.deactivate_subscriber) {
    sub.settings.active = false;
    sub.settings.unusable_reason = "subscriber deactivated after 410 Gone";
    deactivate_.push_back(sub.settings.id);
  }
  push_outcome(std::move(judged.outcome));

  --sub.in_flight;
  --in_flight_;
  --origin.in_flight;
  counters_.add(counters_.in_flight, -1);
  slot_freed(sub, origin);
  finish_if_quiet();
}

void shard::record_attempt(subscriber_state& sub, const storage::claimed_row& row,
                           const http_result& result, const attempt_times& times) {
  counters_.add(counters_.attempts);
  if (result.fresh_retry) counters_.add(counters_.fresh_retries);
  metrics_.count_attempt(result.status);
  metrics_.attempt_duration.observe(times.finished_unix - times.started_unix);
  if (row.attempts == 0) {
    metrics_.due_lag.observe(std::max(0.0, times.started_unix - row.next_attempt_at));
  }
  if (result.status >= 200 && result.status < 300) {
    ++sub.delivered;
    sub.delivery_latency_sum += std::max(0.0, times.finished_unix - row.created_at);
    sub.consecutive_failures = 0;
  } else {
    ++sub.failed_attempts;
    ++sub.consecutive_failures;
  }
  observe_endpoint(sub, result);
}

void shard::observe_endpoint(subscriber_state& sub, const http_result& result) {
  const auto now = steady::now();
  const bool pushback = result.status == 429 || result.status == 503;
  // 5xx and no answer at all say the endpoint is unwell; any other answer says it is alive.
  // A 503 with Retry-After is pushback, handled by the pause, not a sign of a dead endpoint.
  const bool unwell =
      (result.status >= 500 && !(result.status == 503 && !result.retry_after.empty())) ||
      (result.status == 0 && result.error != proto::transport_error::refused_target);
  if (unwell) {
    const bool was_closed = !sub.breaker.blocking();
    sub.breaker.on_failure(now);
    if (was_closed && sub.breaker.blocking()) {
      log_warn("subscriber " + std::to_string(sub.settings.id) + ": circuit open after " +
               std::to_string(sub.consecutive_failures) + " failures; one probe per cool-down");
      // Its buffered rows go back to the queue rather than sit on leases while it is down.
      release_ready(sub);
    }
  } else if (result.status != 0) {
    sub.breaker.on_success();
  }
  const bool changed = pushback ? sub.pace.on_pushback(now)
                                : (result.status >= 200 && result.status < 300 && sub.pace.on_success(now));
  if (changed) sub.bucket.reconfigure(sub.pace.effective(), sub.bucket.capacity(), now);
}

bool shard::lease_too_short(const storage::claimed_row& row) const {
  const double margin =
      std::chrono::duration<double>(config_.http.attempt_timeout).count() + 1.0;
  return storage::unix_now() + margin > row.lease;
}

void shard::slot_freed(subscriber_state& sub, origin_state& origin) {
  sub.notify();
  if (!waiting_for_slot_.empty()) {
    auto* next = waiting_for_slot_.front();
    waiting_for_slot_.pop_front();
    next->waiting_for_slot = false;
    next->notify();
  }
  wake_origin_waiters(origin);
}

void shard::wake_origin_waiters(origin_state& origin) {
  // As many as the origin now admits: the limit may have grown by more than one slot.
  int admissible = origin.limit.enabled() ? origin.limit.limit() - origin.in_flight : 1;
  while (admissible > 0 && !origin.waiting.empty()) {
    auto* next = origin.waiting.front();
    origin.waiting.pop_front();
    if (next->waiting_on_origin != &origin) continue;  // left behind by a URL change
    next->waiting_on_origin = nullptr;
    next->origin_turn = true;
    next->notify();
    --admissible;
  }
}

origin_state& shard::origin_of(const proto::target& target) {
  auto& slot = origins_[target.origin_key];
  if (!slot) slot = std::make_unique<origin_state>(config_.scheduler.origin, steady::now());
  return *slot;
}

void shard::dead_letter(storage::claimed_row row, std::string reason) {
  adjust_buffered(-1);
  counters_.add(counters_.dead);
  auto out = outcome_for(row, storage::outcome_kind::dead);
  out.last_error = std::move(reason);
  out.finished_at = storage::unix_now();
  push_outcome(std::move(out));
}

void shard::release_ready(subscriber_state& sub) {
  for (auto& row : sub.ready) {
    adjust_buffered(-1);
    counters_.add(counters_.released);
    push_outcome(outcome_for(row, storage::outcome_kind::release));
  }
  sub.ready.clear();
}

void shard::reschedule_ready(subscriber_state& sub, double next_attempt_at, std::string reason) {
  for (auto& row : sub.ready) {
    adjust_buffered(-1);
    auto out = outcome_for(row, storage::outcome_kind::retry);
    out.next_attempt_at = next_attempt_at;
    out.last_error = reason;
    push_outcome(std::move(out));
  }
  sub.ready.clear();
}

void shard::adjust_buffered(int delta) {
  buffered_ += delta;
  counters_.add(counters_.buffered, delta);
}

void shard::push_outcome(storage::outcome outcome) {
  outcomes_.push_back(std::move(outcome));
  if (outcomes_.size() >= config_.scheduler.outcome_flush_rows) flush_outcomes();
}

void shard::flush_outcomes() {
  if (outcomes_.empty() && deactivate_.empty()) return;
  storage_.submit(std::exchange(outcomes_, {}), std::exchange(deactivate_, {}));
}

asio::awaitable<void> shard::flush_loop() {
  asio::steady_timer timer(io_);
  auto next_publish = steady::now();
  while (!finished_) {
    timer.expires_after(config_.scheduler.outcome_flush_interval);
    co_await timer.async_wait(use_tuple);
    flush_outcomes();
    metrics_.beat_shard(static_cast<std::size_t>(index_));
    if (steady::now() >= next_publish) {
      publish_metrics();
      next_publish = steady::now() + std::chrono::seconds(1);
    }
    // Idle keep-alive connections are closed before servers close them under us.
    client_.evict_idle();
  }
}

void shard::publish_metrics() {
  drain_metrics::shard_view view;
  const auto now = steady::now();
  for (const auto* sub : order_) {
    if (sub->paused_until > now) ++view.paused_subscribers;
    if (sub->consecutive_failures > 0) ++view.failing_subscribers;
    if (sub->breaker.blocking()) ++view.open_circuits;
    if (sub->breaker.persistently_open()) view.blocked.push_back(sub->settings.id);
    if (sub->delivered + sub->failed_attempts + sub->in_flight == 0 && sub->ready.empty()) continue;
    view.subscribers.push_back({.id = sub->settings.id, .delivered = sub->delivered,
                                .failed = sub->failed_attempts, .in_flight = sub->in_flight,
                                .buffered = static_cast<std::int64_t>(sub->ready.size()),
                                .rate_limit = sub->settings.rate,
                                .paused = sub->paused_until > now,
                                .delivery_latency_sum = sub->delivery_latency_sum});
  }
  // Only the busiest can make the scrape's top list, so keep the hand-off small.
  const std::size_t keep = config_.metrics_top_subscribers;
  if (view.subscribers.size() > keep) {
    std::nth_element(view.subscribers.begin(), view.subscribers.begin() + static_cast<std::ptrdiff_t>(keep),
                     view.subscribers.end(), [](const auto& a, const auto& b) {
                       return a.delivered + a.failed + a.buffered > b.delivered + b.failed + b.buffered;
                     });
    view.subscribers.resize(keep);
  }
  metrics_.publish(static_cast<std::size_t>(index_), std::move(view));
}

void shard::finish_if_quiet() {
  // A claim answer still on its way may carry leased rows; finishing before it arrives would
  // leave them leased until the lease runs out, so a stopping shard waits for it too.
  if (stopping_ && in_flight_ == 0 && !claim_outstanding_) finish();
}

void shard::finish() {
  if (finished_) return;
  flush_outcomes();
  std::vector<storage::bucket_state> buckets;
  const auto now = steady::now();
  const double now_unix = storage::unix_now();
  for (auto& [id, sub] : subscribers_) {
    buckets.push_back({.subscriber_id = id, .tokens = sub->bucket.tokens_at(now),
                       .updated_at = now_unix});
    sub->wake.cancel();
  }
  storage_.submit_buckets(std::move(buckets));
  client_.close_idle();
  finished_ = true;
  work_.reset();
}

}  // namespace surge::engine
