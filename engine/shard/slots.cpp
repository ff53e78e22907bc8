// The slots a subscriber's pump waits for in the shard's core, the shard's and its origin's, and
// how each is handed on when an attempt ends: the shard's to the origin with the fewest in
// flight, an origin's to its subscriber that has waited longest.
#include "engine/shard/core.hpp"

#include <algorithm>

namespace surge::engine {

void shard_core::slot_freed(subscriber_state& sub, origin_state& origin) {
  notify(sub);
  // One waiter per freed slot, or as many as the shard's limit has grown to admit; at least one,
  // which looks again at what holds it.
  hand_out_slots(std::min(
      in_flight_cap_ - in_flight_,
      std::max(1, scheduling::limit_wakeups(shard_limit_.enabled(), shard_limit_.limit(),
                                            shard_limit_.counted_in_flight(now_.steady)))));
  wake_origin_waiters(origin);
}

void shard_core::wait_for_slot(subscriber_state& sub) {
  if (sub.waiting_for_slot) return;
  auto& origin = origin_of(sub);
  sub.waiting_for_slot = true;
  ++slot_waiters_;
  origin.waiting_for_slot.push(&sub);
  if (!origin.listed_for_slot) {
    origin.listed_for_slot = true;
    origins_waiting_for_slot_.push_back(&origin);
  }
}

void shard_core::end_slot_turn(subscriber_state& sub) {
  if (!sub.slot_turn) return;
  sub.slot_turn = false;
  --slots_promised_;
}

void shard_core::hand_out_slots(int slots) {
  // Max-min fair across origins: the freed slot goes where the fewest requests are in flight,
  // so a burst that filled the shard with whichever origins' rows came first evens out within a
  // round trip, and each origin holds the connections of its share rather than of its peak. An
  // origin that cannot use its share leaves it to the others.
  auto& listed = origins_waiting_for_slot_;
  std::vector<std::pair<origin_state*, int>>& granted = slot_grants_scratch_;
  granted.clear();
  auto in_flight_of = [&granted](origin_state* origin) {
    int count = origin->in_flight;
    for (const auto& [granted_to, n] : granted) count += granted_to == origin ? n : 0;
    return count;
  };
  while (slots > 0 && !listed.empty()) {
    const auto fairest = std::min_element(
        listed.begin(), listed.end(),
        [&](origin_state* a, origin_state* b) { return in_flight_of(a) < in_flight_of(b); });
    origin_state& origin = **fairest;
    const int woken = origin.waiting_for_slot.hand_out(
        1, [](const subscriber_state& next) { return next.waiting_for_slot; },
        [this](subscriber_state& next) {
          next.waiting_for_slot = false;
          next.slot_turn = true;
          ++slots_promised_;
          --slot_waiters_;
          notify(next);
        });
    if (woken == 0 || origin.waiting_for_slot.empty()) {
      origin.listed_for_slot = false;
      *fairest = listed.back();
      listed.pop_back();
    }
    if (woken == 0) continue;
    --slots;
    auto grant = std::find_if(granted.begin(), granted.end(),
                              [&origin](const auto& entry) { return entry.first == &origin; });
    if (grant == granted.end()) {
      granted.emplace_back(&origin, 1);
    } else {
      ++grant->second;
    }
  }
}

void shard_core::wake_origin_waiters(origin_state& origin) {
  const int admissible =
      std::min(origin.room_by_need(now_.steady),
               scheduling::limit_wakeups(origin.limit.enabled(), origin.limit.limit(),
                                         origin.limit.counted_in_flight(now_.steady)));
  origin.waiting.hand_out(
      admissible,
      [&origin](const subscriber_state& next) { return next.waiting_on_origin == &origin; },
      [this](subscriber_state& next) {
        next.waiting_on_origin = nullptr;
        next.origin_turn = true;
        notify(next);
      });
}

origin_state& shard_core::origin_of(subscriber_state& sub) {
  if (sub.origin_target != sub.settings.target) {
    // Origin states are never removed, so the pointer stays valid; holding the target it was
    // found for means a reload's new target, even at a reused address, is looked up again.
    auto& slot = origins_[sub.settings.target->origin_key];
    if (!slot) slot = std::make_unique<origin_state>(config_.scheduler.origin, now_.steady);
    sub.origin = slot.get();
    sub.origin_target = sub.settings.target;
  }
  return *sub.origin;
}

std::vector<origin_snapshot> shard_core::origin_snapshots() const {
  std::unordered_map<const origin_state*, origin_snapshot> by_state;
  for (const auto& [key, state] : origins_) {
    const auto& limit = state->limit;
    origin_snapshot snap{.origin = key,
                         .rate_limit = state->rate_sum,
                         .in_flight = state->in_flight,
                         .limit = limit.enabled() ? limit.limit() : 0};
    const auto seconds = [](origin_limit::duration d) -> std::optional<double> {
      if (d == origin_limit::duration::max() || d <= origin_limit::duration::zero()) return {};
      return std::chrono::duration<double>(d).count();
    };
    if (limit.enabled()) {
      const int need = scheduling::origin_need_ceiling(state->rate_sum, limit.acceptable_latency());
      if (need != INT_MAX) snap.need = need;
      snap.best_latency = seconds(limit.best_latency());
      snap.usual_latency = seconds(limit.usual_latency());
      snap.acceptable_latency = seconds(limit.acceptable_latency());
      snap.judged_by_usual = limit.judged_by_usual();
    }
    by_state.emplace(state.get(), std::move(snap));
  }
  const auto now = now_.steady;
  for (const auto* sub : demand_.scan_order()) {
    if (!sub->origin || sub->origin_target != sub->settings.target) continue;
    auto it = by_state.find(sub->origin);
    if (it == by_state.end()) continue;
    if (sub->settings.active) ++it->second.subscribers;
    // Its queue entries outlive what it waited for (rows released, a pause, a reload):
    // only one with a row ready that could go now waits.
    const bool could_send =
        !sub->ready.empty() && sub->settings.active && !sub->disowned && !sub->limits.paused(now);
    if (!could_send) continue;
    if (sub->waiting_on_origin == sub->origin) ++it->second.waiting_for_origin;
    if (sub->waiting_for_slot) ++it->second.waiting_for_shard;
  }
  std::vector<origin_snapshot> out;
  out.reserve(by_state.size());
  for (auto& [state, snap] : by_state) {
    // An origin none of whose subscribers sends here any more (a URL changed) keeps its state
    // for a reload that goes back to it; it is not the operator's concern until then.
    if (snap.subscribers > 0 || snap.in_flight > 0) out.push_back(std::move(snap));
  }
  return out;
}

}  // namespace surge::engine
