#include "engine/shard/shard.hpp"

#include <pthread.h>

#include <algorithm>
#include <cmath>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>

#include "engine/awaiting.hpp"
#include "engine/shard/delivery.hpp"
#include "engine/observe/log.hpp"
#include "proto/clock.hpp"

namespace surge::engine {

namespace asio = boost::asio;
namespace http = boost::beast::http;

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
      identities_(config.http),
      in_flight_cap_(std::max(1, config.scheduler.max_in_flight / shard_count)),
      rng_(std::random_device{}()) {
  bytes_per_row_ = static_cast<double>(config.scheduler.max_payload_bytes);
}

shard::~shard() { join(); }

void shard::start() {
  asio::co_spawn(io_, demand_loop(), asio::detached);
  asio::co_spawn(io_, flush_loop(), asio::detached);
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "surge-shard");
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
  asio::post(io_,
             [this, rows = std::move(rows)]() mutable { update_subscribers(std::move(rows)); });
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
  const double now_unix = proto::unix_now();
  for (auto& row : rows) {
    auto settings = derive_settings(row, config_.scheduler);
    if (settings.credentials_problem.empty()) {
      auto found = identities_.get(row.client_cert_file, row.client_key_file,
                                   static_cast<std::time_t>(proto::unix_now()));
      settings.identity = std::move(found.identity);
      settings.credentials_problem = std::move(found.problem);
    }
    // Held, not failed: without what the partner requires every attempt would be refused.
    if (!settings.credentials_problem.empty()) settings.rate = 0;
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
    const std::string& credentials_before =
        it == subscribers_.end() ? std::string() : it->second->settings.credentials_problem;
    if (settings.credentials_problem != credentials_before) {
      const std::string who = "subscriber " + std::to_string(row.id) + ": ";
      if (settings.credentials_problem.empty()) {
        log_info(who + "its credentials are usable again; sending resumes");
      } else {
        log_warn(who + settings.credentials_problem +
                 "; held: its rows stay queued and --until-drained does not wait for them");
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
      sub.scan_index = order_.size();
      poll_after_.emplace_back();
      order_.push_back(&sub);
      subscribers_.emplace(row.id, std::move(state));
      if (!stopping_) asio::co_spawn(io_, pump(sub), asio::detached);
    } else {
      auto& sub = *it->second;
      // New limits take effect without resetting tokens; a rate lowered by
      // pushback stays lowered, within the new limit.
      sub.pace.reconfigure(row.rate_per_sec);
      // Queued behind another origin now: let the pump find its new one.
      const bool moved = settings.target && sub.settings.target &&
                         settings.target->origin_key != sub.settings.target->origin_key;
      if (moved) sub.waiting_on_origin = nullptr;
      settings.batch_rows = std::min(settings.batch_rows, sub.batch_fits);
      sub.settings = std::move(settings);
      // The partner's announced quota, if one is in force, still lowers the new limit.
      sub.apply_limits(now);
      sub.notify_wire();
      sub.notify();
    }
  }
}

void shard::dead_letter(storage::claimed_row row, std::string reason) {
  adjust_buffered(-1);
  let_go(row);
  counters_.add(counters_.dead);
  auto out = outcome_for(row, storage::outcome_kind::dead);
  out.last_error = std::move(reason);
  out.finished_at = proto::unix_now();
  push_outcome(std::move(out));
}

void shard::release_ready(subscriber_state& sub) {
  for (auto& row : sub.ready) {
    adjust_buffered(-1);
    let_go(row);
    counters_.add(counters_.released);
    push_outcome(outcome_for(row, storage::outcome_kind::release));
  }
  sub.ready.clear();
}

void shard::reschedule_ready(subscriber_state& sub, double next_attempt_at, std::string reason) {
  for (auto& row : sub.ready) {
    adjust_buffered(-1);
    let_go(row);
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
  const auto rows = outcomes_.size();
  storage_.submit(std::exchange(outcomes_, {}), std::exchange(deactivate_, {}));
  // The vector went to the storage thread; the next batch is likely as large, and growing it
  // one doubling at a time would cost a malloc per doubling.
  outcomes_.reserve(rows);
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
  const auto wall_now = std::chrono::system_clock::now();
  for (const auto* sub : order_) {
    if (sub->paused_until > now) ++view.paused_subscribers;
    if (sub->quota_limit && sub->quota_limit->until > now) ++view.quota_paced;
    if (sub->consecutive_failures > 0) ++view.failing_subscribers;
    if (sub->breaker.blocking()) ++view.open_circuits;
    if (sub->breaker.persistently_open() || !sub->settings.credentials_problem.empty()) {
      view.blocked.push_back(sub->settings.id);
    }
    if (sub->delivered + sub->failed_attempts + sub->in_flight == 0 && sub->ready.empty()) continue;
    view.subscribers.push_back({.id = sub->settings.id,
                                .delivered = sub->delivered,
                                .failed = sub->failed_attempts,
                                .in_flight = sub->in_flight,
                                .buffered = static_cast<std::int64_t>(sub->ready.size()),
                                .rate_limit = sub->settings.rate,
                                .paused = sub->paused_until > now,
                                .delivery_latency_sum = sub->delivery_latency_sum,
                                .announced = announced_of(*sub, wall_now)});
  }
  // Only the busiest can make the scrape's top list, so keep the hand-off small.
  const std::size_t keep = config_.metrics_top_subscribers;
  if (view.subscribers.size() > keep) {
    std::nth_element(
        view.subscribers.begin(), view.subscribers.begin() + static_cast<std::ptrdiff_t>(keep),
        view.subscribers.end(), [](const auto& a, const auto& b) {
          return a.delivered + a.failed + a.buffered > b.delivered + b.failed + b.buffered;
        });
    view.subscribers.resize(keep);
  }
  metrics_.publish(static_cast<std::size_t>(index_), std::move(view));
  hand_over_quotas();
}

void shard::finish_if_quiet() {
  // A claim answer still on its way may carry leased rows; finishing before it arrives would
  // leave them leased until the lease runs out, so a stopping shard waits for it too.
  if (stopping_ && in_flight_ == 0 && !claim_outstanding_) finish();
}

void shard::finish() {
  if (finished_) return;
  flush_outcomes();
  hand_over_quotas();  // before the unspent tokens: the storage thread ends once it has those
  // Leased tokens not spent go back to the persisted buckets, for whichever drainer comes next.
  std::vector<storage::unspent_tokens> unspent;
  for (auto& [id, sub] : subscribers_) {
    unspent.push_back({.subscriber_id = id, .tokens = sub->allowance.take_unspent()});
    sub->wake.cancel();
  }
  storage_.submit_unspent(std::move(unspent));
  client_.close_idle();
  finished_ = true;
  work_.reset();
}

}  // namespace surge::engine
