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
      client_(io_.get_executor(), std::move(tls), config.http,
              {.open_connections = &metrics.open_connections,
               .tls_full_handshakes = &metrics.tls_handshakes_full,
               .tls_resumed_handshakes = &metrics.tls_handshakes_resumed}),
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
      sub->notify_wire();  // attempts not yet written give their rows back
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
    // Unusable limits pause the subscriber (derive_settings): the bucket and everything else
    // that reads the row's limits below see the pause, not the bad values.
    row.rate_per_sec = settings.rate;
    row.burst = static_cast<std::int64_t>(settings.burst);
    auto it = subscribers_.find(row.id);
    // Once per subscriber and value: reloads every few seconds must not repeat it.
    const std::string& before =
        it == subscribers_.end() ? std::string() : it->second->settings.limits_problem;
    if (settings.limits_problem != before) {
      const std::string who = "subscriber " + std::to_string(row.id) + ": ";
      if (settings.limits_problem.empty()) {
        log_info(who + "rate and burst are usable again; sending resumes");
      } else {
        log_warn(who + settings.limits_problem +
                 "; treated as paused: its rows stay queued and --until-drained does not wait "
                 "for them");
      }
    }
    const std::string& relief_before =
        it == subscribers_.end() ? std::string() : it->second->settings.relief_problem;
    if (settings.relief_problem != relief_before && !settings.relief_problem.empty()) {
      log_warn("subscriber " + std::to_string(row.id) + ": " + settings.relief_problem);
    }
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
      sub.wire.reconfigure(row.rate_per_sec, static_cast<double>(row.burst), now);
      sub.notify_wire();
      // Queued behind another origin now: let the pump find its new one.
      const bool moved = settings.target && sub.settings.target &&
                         settings.target->origin_key != sub.settings.target->origin_key;
      if (moved) sub.waiting_on_origin = nullptr;
      sub.settings = std::move(settings);
      sub.notify();
    }
  }
}

scheduling::pump_facts shard::pump_facts_of(const subscriber_state& sub,
                                            steady::time_point now) {
  scheduling::pump_facts facts;
  facts.has_rows = !sub.ready.empty();
  if (!facts.has_rows) return facts;
  const auto& front = sub.ready.front();
  facts.active = sub.settings.active;
  facts.rate_paused = sub.bucket.paused();
  facts.unusable = !sub.settings.unusable_reason.empty();
  // The claim left an oversized payload in the database (storage::claimer): only its size is here.
  facts.front_too_large =
      static_cast<std::size_t>(front.payload_bytes) > config_.scheduler.max_payload_bytes;
  facts.front_refused = !delivery_refusal(front).empty();
  facts.front_lease_too_short = lease_too_short(front);
  facts.paused_until = sub.paused_until;
  facts.circuit_blocking = sub.breaker.blocking() && !sub.probe_due(now);
  if (sub.breaker.current() == circuit_breaker::state::open) {
    facts.next_probe_at = sub.breaker.next_probe_at();
  }
  facts.in_flight = sub.in_flight;
  facts.in_flight_cap = sub.settings.in_flight_cap;
  facts.shard_full = in_flight_ >= in_flight_cap_;
  if (sub.settings.target) {
    const auto& origin = origin_of(*sub.settings.target);
    facts.origin_admits = origin.limit.admits_at(now);
    facts.origin_recount_at = origin.limit.next_recount_at(now);
    facts.origin_has_waiters = !origin.waiting.empty();
  }
  facts.origin_turn = sub.origin_turn;
  facts.batching = sub.settings.batch_rows > 1;
  if (facts.batching) facts.batch_full = batch_full(sub);
  facts.batch_wait_since = sub.batch_wait_since;
  facts.batch_linger = sub.settings.batch_linger;
  facts.stopping = stopping_;
  facts.token_wait = sub.bucket.time_until_available(now);
  return facts;
}

asio::awaitable<void> shard::pump(subscriber_state& sub) {
  using scheduling::pump_action;
  const auto& limits = config_.scheduler;
  while (!stopping_) {
    const auto now = steady::now();
    const auto decision = scheduling::next_pump_step(pump_facts_of(sub, now), now);
    switch (decision.action) {
      case pump_action::wait:
        break;
      case pump_action::release_buffered:
        release_ready(sub);
        continue;
      case pump_action::dead_letter_buffered:
        while (!sub.ready.empty()) {
          auto row = std::move(sub.ready.front());
          sub.ready.pop_front();
          dead_letter(std::move(row), sub.settings.unusable_reason);
        }
        continue;
      case pump_action::dead_letter_front_too_large: {
        auto row = std::move(sub.ready.front());
        sub.ready.pop_front();
        const auto size = row.payload_bytes;
        dead_letter(std::move(row), "payload too large: " + std::to_string(size) +
                                        " bytes, limit " +
                                        std::to_string(limits.max_payload_bytes));
        continue;
      }
      case pump_action::dead_letter_front_refused: {
        auto row = std::move(sub.ready.front());
        sub.ready.pop_front();
        auto refusal = delivery_refusal(row);
        dead_letter(std::move(row), std::move(refusal));
        continue;
      }
      case pump_action::release_front: {
        // Claimed again on the next round, by whoever then has a lease long enough.
        auto row = std::move(sub.ready.front());
        sub.ready.pop_front();
        adjust_buffered(-1);
        counters_.add(counters_.released);
        push_outcome(outcome_for(row, storage::outcome_kind::release));
        continue;
      }
      case pump_action::queue_for_shard_slot:
        if (!sub.waiting_for_slot) {
          sub.waiting_for_slot = true;
          waiting_for_slot_.push_back(&sub);
        }
        break;
      case pump_action::queue_for_origin: {
        auto& origin = origin_of(*sub.settings.target);
        origin.limit.note_blocked();
        if (sub.waiting_on_origin != &origin) {
          sub.waiting_on_origin = &origin;
          origin.waiting.push_back(&sub);
        }
        break;
      }
      case pump_action::start_linger:
        // The token stays in the bucket while the batch fills.
        sub.batch_wait_since = now;
        break;
      case pump_action::send:
        send_next(sub, now);
        continue;
    }
    if (decision.waits_for_token) {
      if (!sub.token_wait_since) sub.token_wait_since = now;
    }
    sub.wake.expires_at(decision.wake_at);
    co_await sub.wake.async_wait(use_tuple);
  }
}

void shard::send_next(subscriber_state& sub, steady::time_point now) {
  if (!sub.bucket.try_take(now)) return;  // next_pump_step saw the token: only a race with time
  auto& origin = origin_of(*sub.settings.target);
  sub.origin_turn = false;
  const bool probe = sub.breaker.current() == circuit_breaker::state::open;
  sub.breaker.try_admit(now);  // an open circuit whose probe is due becomes probing
  if (sub.token_wait_since) {
    add_to(metrics_.token_wait_seconds,
           std::chrono::duration<double>(now - *sub.token_wait_since).count());
    sub.token_wait_since.reset();
  }
  // One token and one slot per request, however many rows it carries.
  bool batched = false;
  auto rows = take_request_rows(sub, batched);
  adjust_buffered(-static_cast<int>(rows.size()));
  ++sub.in_flight;
  ++in_flight_;
  ++origin.in_flight;
  const auto ticket = origin.limit.enabled() ? origin.limit.on_start(now) : 0;
  counters_.add(counters_.in_flight);
  asio::co_spawn(io_,
                 attempt(sub, origin, std::move(rows), batched, sub.settings.target,
                         sub.settings.signer, probe, ticket),
                 asio::detached);
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
  int admissible = scheduling::origin_wakeups(origin.limit.enabled(), origin.limit.limit(),
                                              origin.limit.counted_in_flight(steady::now()));
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
    // The emptier of the two: what the partner has seen is what the next drainer may not repeat.
    const double tokens = std::min(sub->bucket.tokens_at(now), sub->wire.tokens_at(now));
    buckets.push_back({.subscriber_id = id, .tokens = tokens, .updated_at = now_unix});
    sub->wake.cancel();
  }
  storage_.submit_buckets(std::move(buckets));
  client_.close_idle();
  finished_ = true;
  work_.reset();
}

}  // namespace surge::engine
