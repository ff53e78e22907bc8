// A subscriber's pump in the shard's core: it gathers the facts, lets
// scheduling::next_pump_step decide, and carries the decision out until it has to wait (then it
// arms its wake); and the attempt it starts. The slots it waits for are shard_slots'.
#include "engine/shard/core.hpp"

#include <algorithm>

#include "engine/shard/delivery.hpp"

namespace surge::engine {

scheduling::pump_facts shard_core::pump_facts_of(subscriber_state& sub) {
  auto facts = sub.own_facts(row_checks_, config_.scheduler.max_payload_bytes, now_.steady,
                             now_.unix_seconds());
  if (!facts.has_rows) return facts;
  slots_.describe(facts, sub, now_.steady);
  facts.stopping = stopping_;
  return facts;
}

void shard_core::run_pump(subscriber_state& sub) {
  using scheduling::pump_action;
  const auto& limits = config_.scheduler;
  const auto now = now_.steady;
  const double now_unix = now_.unix_seconds();
  while (!stopping_) {
    if (sub.limits.expire_announced(now)) notify_line(sub);
    const auto decision = scheduling::next_pump_step(pump_facts_of(sub), now);
    switch (decision.action) {
      case pump_action::wait: break;
      case pump_action::release_buffered: rows_.release_ready(sub); continue;
      case pump_action::dead_letter_buffered:
        rows_.dead_letter_all(sub, sub.settings.unusable_reason, now_unix);
        continue;
      case pump_action::dead_letter_front_too_large:
        rows_.dead_letter_front(
            sub,
            "payload too large: " + std::to_string(sub.ready.front().payload_bytes) +
                " bytes, limit " + std::to_string(limits.max_payload_bytes),
            now_unix);
        continue;
      case pump_action::dead_letter_front_refused:
        rows_.dead_letter_front(sub, row_checks_.refusal(sub.ready.front(), now_unix), now_unix);
        continue;
      case pump_action::release_front:
        // Claimed again on the next round, by whoever then has a lease long enough.
        rows_.release_front(sub);
        continue;
      case pump_action::queue_for_shard_slot: slots_.queue_for_shard(sub, now); break;
      case pump_action::queue_for_origin: slots_.queue_for_origin(sub, now); break;
      case pump_action::start_linger:
        // The token stays in the bucket while the batch fills.
        sub.batch_wait_since = now;
        break;
      case pump_action::send: send_next(sub); continue;
    }
    slots_.end_turn(sub);  // a turn not taken at once is gone
    if (decision.waits_for_token) {
      if (!sub.token_wait_since) sub.token_wait_since = now;
    }
    // An announced quota's limit ends at its reset, whatever the pump waits for.
    wakes_.arm(sub, wake_schedule::kind::pump,
               std::min(decision.wake_at, sub.limits.announced_until().value_or(decision.wake_at)));
    return;
  }
}

void shard_core::send_next(subscriber_state& sub) {
  const auto now = now_.steady;
  if (!sub.limits.admit(now)) return;  // next_pump_step saw the token: only a race with time
  auto& origin = origin_of(sub);
  const bool probe = sub.breaker.current() == circuit_breaker::state::open;
  sub.breaker.try_admit(now);  // an open circuit whose probe is due becomes probing
  if (sub.token_wait_since) {
    add_to(metrics_.token_wait_seconds,
           std::chrono::duration<double>(now - *sub.token_wait_since).count());
    sub.token_wait_since.reset();
  }
  // One token and one slot per request, however many rows it carries.
  const attempt_id id = attempts_.open();
  auto& attempt = attempts_[id];
  attempt.sub = &sub;
  attempt.origin = &origin;
  sub.batch_wait_since.reset();
  attempt.rows = take_request_rows(sub.ready, sub.batching(), row_checks_, now_.unix_seconds(),
                                   attempt.batched);
  attempt.probe = probe;
  attempt.started_unix = now_.unix_seconds();
  rows_.sent(static_cast<int>(attempt.rows.size()));
  ++sub.in_flight;
  attempt.slots = slots_.start(sub, origin, now);
  counters_.add(counters_.in_flight);
  // The target and signer the pump saw, so a reload cannot change them mid-attempt.
  auto& send = out_.sends.emplace_back();
  send.attempt = id;
  send.target = sub.settings.target;
  send.identity = sub.settings.identity;
  send.proxy = sub.settings.proxy;
  send.request = request_buffers_.take();
  try {
    prepare_request(attempt, send.request, send.target, *sub.settings.signer,
                    {config_.http.user_agent, row_checks_.lease_margin}, now);
  } catch (const std::exception& error) {
    // Never expected (delivery_refusal and the settings' checks keep unsafe values out): the
    // attempt ends as an error of its own, its rows judged like any failed attempt's.
    request_buffers_.give_back(std::move(send.request));
    out_.sends.pop_back();
    http_result failed;
    failed.error = proto::transport_error::protocol;
    failed.detail = std::string("internal error: ") + error.what();
    settle_attempt(attempt, failed);
    attempts_.close(id);
  }
}

}  // namespace surge::engine
