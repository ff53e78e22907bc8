#include "engine/shard/subscriber_pump.hpp"

#include <algorithm>
#include <exception>
#include <utility>

#include "engine/shard/delivery.hpp"

namespace surge::engine {

subscriber_pump::subscriber_pump(pump_config config, pump_machines machines,
                                 settle_unsendable settle)
    : config_(std::move(config)), on_(machines), settle_unsendable_(std::move(settle)) {}

scheduling::pump_facts subscriber_pump::facts_of(subscriber_state& sub, shard_time now,
                                                 bool stopping) {
  auto facts = sub.own_facts(config_.checks, config_.checks.max_payload_bytes, now.steady,
                             now.unix_seconds());
  if (!facts.has_rows) return facts;
  on_.slots.describe(facts, sub, now.steady);
  facts.stopping = stopping;
  return facts;
}

void subscriber_pump::run(subscriber_state& sub, shard_time time, bool stopping) {
  using scheduling::pump_action;
  const auto now = time.steady;
  const double now_unix = time.unix_seconds();
  const auto& checks = config_.checks;
  while (!stopping) {
    if (sub.limits.expire_announced(now)) on_.wakes.queue_line(sub);
    const auto decision = scheduling::next_pump_step(facts_of(sub, time, stopping), now);
    switch (decision.action) {
      case pump_action::wait: break;
      case pump_action::release_buffered: on_.rows.release_ready(sub); continue;
      case pump_action::dead_letter_buffered:
        on_.rows.dead_letter_all(sub, sub.settings.unusable_reason, now_unix);
        continue;
      case pump_action::dead_letter_front_too_large:
        on_.rows.dead_letter_front(
            sub,
            "payload too large: " + std::to_string(sub.ready.front().payload_bytes) +
                " bytes, limit " + std::to_string(checks.max_payload_bytes),
            now_unix);
        continue;
      case pump_action::dead_letter_front_refused:
        on_.rows.dead_letter_front(sub, checks.refusal(sub.ready.front(), now_unix), now_unix);
        continue;
      case pump_action::release_front:
        // Claimed again on the next round, by whoever then has a lease long enough.
        on_.rows.release_front(sub);
        continue;
      case pump_action::queue_for_shard_slot: on_.slots.queue_for_shard(sub, now); break;
      case pump_action::queue_for_origin: on_.slots.queue_for_origin(sub, now); break;
      case pump_action::start_linger:
        // The token stays in the bucket while the batch fills.
        sub.batch_wait_since = now;
        break;
      case pump_action::send: send_next(sub, time); continue;
    }
    on_.slots.end_turn(sub);  // a turn not taken at once is gone
    if (decision.waits_for_token) {
      if (!sub.token_wait_since) sub.token_wait_since = now;
    }
    // An announced quota's limit ends at its reset, whatever the pump waits for.
    on_.wakes.arm(
        sub, wake_schedule::kind::pump,
        std::min(decision.wake_at, sub.limits.announced_until().value_or(decision.wake_at)));
    return;
  }
}

void subscriber_pump::send_next(subscriber_state& sub, shard_time time) {
  const auto now = time.steady;
  if (!sub.limits.admit(now)) return;  // next_pump_step saw the token: only a race with time
  auto& origin = on_.slots.origin_of(sub, now);
  const bool probe = sub.breaker.current() == circuit_breaker::state::open;
  sub.breaker.try_admit(now);  // an open circuit whose probe is due becomes probing
  if (sub.token_wait_since) {
    add_to(on_.metrics.token_wait_seconds,
           std::chrono::duration<double>(now - *sub.token_wait_since).count());
    sub.token_wait_since.reset();
  }
  // One token and one slot per request, however many rows it carries.
  const attempt_id id = on_.attempts.open();
  auto& attempt = on_.attempts[id];
  attempt.sub = &sub;
  attempt.origin = &origin;
  sub.batch_wait_since.reset();
  attempt.rows = take_request_rows(sub.ready, sub.batching(), config_.checks, time.unix_seconds(),
                                   attempt.batched);
  attempt.probe = probe;
  attempt.refundable = true;
  attempt.started_unix = time.unix_seconds();
  // Counted in flight before the rows stop counting as buffered (drain_counters).
  on_.metrics.counters.add(on_.metrics.counters.in_flight);
  on_.rows.sent(static_cast<int>(attempt.rows.size()));
  ++sub.in_flight;
  attempt.slots = on_.slots.start(sub, origin, now);
  // The target and signer the pump saw, so a reload cannot change them mid-attempt.
  auto& send = on_.sends.emplace_back();
  send.attempt = id;
  send.target = sub.settings.target;
  send.identity = sub.settings.identity;
  send.proxy = sub.settings.proxy;
  send.request = request_buffers_.take();
  try {
    prepare_request(attempt, send.request, send.target, *sub.settings.signer,
                    {config_.user_agent, config_.checks.lease_margin}, now);
  } catch (const std::exception& error) {
    // Never expected (delivery_refusal and the settings' checks keep unsafe values out): the
    // attempt ends as an error of its own, its rows judged like any failed attempt's.
    request_buffers_.give_back(std::move(send.request));
    on_.sends.pop_back();
    http_result failed;
    failed.error = proto::transport_error::protocol;
    failed.detail = std::string("internal error: ") + error.what();
    settle_unsendable_(attempt, failed);
    on_.attempts.close(id);
  }
}

}  // namespace surge::engine
