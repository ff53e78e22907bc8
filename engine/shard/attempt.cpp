// One attempt's events in the shard's core: the wire gate's verdict, and its end (settled by
// attempt_settlement, then its slots freed and its subscriber's pump woken).
#include "engine/shard/core.hpp"

namespace surge::engine {

std::optional<bool> shard_core::on_write_ready(attempt_id id, bool fresh_connection,
                                               shard_time now) {
  if (!begin_event(now)) return false;
  auto& attempt = attempts_[id];
  auto& sub = *attempt.sub;
  const auto answer = sub.line.arrive(
      {.attempt = id, .give_up_at = attempt.give_up_at, .fresh_connection = fresh_connection},
      gate_of(sub), now_.steady);
  if (answer) judged_at_gate(id, *answer);
  if (!answer) notify_line(sub);  // it waits: the line says when to look again
  end_event();
  return answer;
}

void shard_core::judged_at_gate(attempt_id id, bool go) {
  // On the wire: the allowance's token is spent for good (the one fresh retry writes on it).
  if (go) attempts_[id].refundable = false;
}

void shard_core::on_response(attempt_id id, const http_result& result, std::string request,
                             shard_time now) {
  if (!begin_event(now)) return;
  pump_.give_back(std::move(request));
  settle_attempt(attempts_[id], result);
  attempts_.close(id);
  end_event();
}

void shard_core::settle_attempt(attempt_state& attempt, const http_result& result) {
  const bool frees_key = settlement_.settle(attempt, result, now_);
  attempt_ended(attempt);
  if (frees_key) claim_after_key_freed(*attempt.sub);
}

void shard_core::attempt_ended(attempt_state& attempt) {
  auto& sub = *attempt.sub;
  auto& origin = *attempt.origin;
  attempt.rows.clear();
  if (std::exchange(attempt.refundable, false)) {
    sub.limits.not_written();
    // Watched again, so that the token goes back once unspent for a lease, whether or not the
    // subscriber claims again (a pause, a deactivation).
    demand_.watch_tokens(sub);
  }
  --sub.in_flight;
  // Released: its outcome was counted in transit first (drain_counters).
  counters_.in_flight.fetch_sub(1, std::memory_order_release);
  notify(sub);
  auto& woken = woken_scratch_;
  woken.clear();
  slots_.end(origin, attempt.slots, now_.steady, woken);
  for (auto* next : woken) notify(*next);
}

}  // namespace surge::engine
