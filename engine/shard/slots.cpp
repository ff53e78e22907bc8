// The slots a subscriber's pump waits for, the shard's and its origin's, and how each is handed
// on when an attempt ends: the shard's to the origin with the fewest in flight, an origin's to its
// subscriber that has waited longest.
#include "engine/shard/slots.hpp"

#include <algorithm>

namespace surge::engine {

shard_slots::shard_slots(const scheduler_config& config, int in_flight_cap, steady::time_point now)
    : origin_config_(config.origin),
      in_flight_cap_(in_flight_cap),
      limit_(config.shard, in_flight_cap, config.origin.latency_tolerance > 0, now) {}

origin_state& shard_slots::origin_of(subscriber_state& sub, steady::time_point now) {
  if (sub.origin_target != sub.settings.target) {
    // Origin states are never removed, so the pointer stays valid; holding the target it was
    // found for means a reload's new target, even at a reused address, is looked up again.
    auto& slot = origins_[sub.settings.target->origin_key];
    if (!slot) slot = std::make_unique<origin_state>(origin_config_, now);
    sub.origin = slot.get();
    sub.origin_target = sub.settings.target;
  }
  return *sub.origin;
}

void shard_slots::describe(scheduling::pump_facts& facts, subscriber_state& sub,
                           steady::time_point now) {
  // Slots handed to subscribers whose pumps have not run yet are theirs: another pump that runs
  // first does not take them.
  const int promised = slots_promised_ - (sub.slot_turn ? 1 : 0);
  facts.shard_full = in_flight_ + promised >= in_flight_cap_;
  facts.shard_has_waiters = slot_waiters_ > 0;
  facts.slot_turn = sub.slot_turn || sub.waiting_for_slot;
  facts.shard_admits = limit_.admits_at(now);
  if (!facts.shard_admits) facts.shard_recount_at = limit_.next_recount_at(now);
  if (sub.settings.target) {
    const auto& origin = origin_of(sub, now);
    facts.origin_admits = origin.admits_at(now);
    facts.origin_recount_at = origin.limit.next_recount_at(now);
    facts.origin_has_waiters = !origin.waiting.empty();
    facts.origin_floor =
        scheduling::paced_below_one_slot(sub.settings.rate, origin.limit.best_latency());
  }
  facts.origin_turn = sub.origin_turn;
}

void shard_slots::queue_for_shard(subscriber_state& sub, steady::time_point now) {
  if (in_flight_ < in_flight_cap_ && !limit_.admits_at(now)) limit_.note_blocked();
  wait_for_slot(sub, now);
}

void shard_slots::queue_for_origin(subscriber_state& sub, steady::time_point now) {
  auto& origin = origin_of(sub, now);
  origin.limit.note_blocked();
  if (sub.waiting_on_origin != &origin) {
    sub.waiting_on_origin = &origin;
    origin.waiting.push(&sub);
  }
}

void shard_slots::wait_for_slot(subscriber_state& sub, steady::time_point now) {
  if (sub.waiting_for_slot) return;
  auto& origin = origin_of(sub, now);
  sub.waiting_for_slot = true;
  ++slot_waiters_;
  origin.waiting_for_slot.push(&sub);
  if (!origin.listed_for_slot) {
    origin.listed_for_slot = true;
    origins_waiting_for_slot_.push_back(&origin);
  }
}

void shard_slots::end_turn(subscriber_state& sub) {
  if (!sub.slot_turn) return;
  sub.slot_turn = false;
  --slots_promised_;
}

shard_slots::held shard_slots::start(subscriber_state& sub, origin_state& origin,
                                     steady::time_point now) {
  sub.origin_turn = false;
  end_turn(sub);
  if (sub.waiting_for_slot) {  // it found a slot before its turn came: it waits no more
    sub.waiting_for_slot = false;
    --slot_waiters_;
  }
  ++in_flight_;
  ++origin.in_flight;
  held slots;
  if (origin.limit.enabled()) slots.origin_ticket = origin.limit.on_start(now);
  if (limit_.enabled()) slots.shard_ticket = limit_.on_start(now, origin.limit.overdue_after());
  return slots;
}

void shard_slots::on_latency(origin_state& origin, steady::duration latency, const held& slots,
                             steady::time_point now) {
  origin.limit.on_latency(latency, now, slots.origin_ticket);
  limit_.on_latency(latency, origin.limit.acceptable_latency(), now);
}

void shard_slots::end(origin_state& origin, const held& slots, steady::time_point now,
                      std::vector<subscriber_state*>& woken) {
  if (origin.limit.enabled()) {
    const bool was_judged_by_usual = origin.limit.judged_by_usual();
    origin.limit.on_end(slots.origin_ticket);
    // The origin's usual latency now sets what counts as queued there, instead of its best: the
    // shard's limit judged the origin's answers by the lower measure too.
    if (!was_judged_by_usual && origin.limit.judged_by_usual()) limit_.resume_slow_start();
  }
  if (limit_.enabled()) limit_.on_end(slots.shard_ticket);
  --in_flight_;
  --origin.in_flight;
  // One waiter per freed slot, or as many as the shard's limit has grown to admit; at least one,
  // which looks again at what holds it.
  hand_out_slots(std::min(in_flight_cap_ - in_flight_,
                          std::max(1, scheduling::limit_wakeups(limit_.enabled(), limit_.limit(),
                                                                limit_.counted_in_flight(now)))),
                 woken);
  wake_origin_waiters(origin, now, woken);
}

void shard_slots::hand_out_slots(int slots, std::vector<subscriber_state*>& woken) {
  // Max-min fair across origins: the freed slot goes where the fewest requests are in flight,
  // so a burst that filled the shard with whichever origins' rows came first evens out within a
  // round trip, and each origin holds the connections of its share rather than of its peak. An
  // origin that cannot use its share leaves it to the others.
  auto& listed = origins_waiting_for_slot_;
  auto& granted = grants_scratch_;
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
    const int handed = origin.waiting_for_slot.hand_out(
        1, [](const subscriber_state& next) { return next.waiting_for_slot; },
        [this, &woken](subscriber_state& next) {
          next.waiting_for_slot = false;
          next.slot_turn = true;
          ++slots_promised_;
          --slot_waiters_;
          woken.push_back(&next);
        });
    if (handed == 0 || origin.waiting_for_slot.empty()) {
      origin.listed_for_slot = false;
      *fairest = listed.back();
      listed.pop_back();
    }
    if (handed == 0) continue;
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

void shard_slots::wake_origin_waiters(origin_state& origin, steady::time_point now,
                                      std::vector<subscriber_state*>& woken) {
  const int admissible =
      std::min(origin.room_by_need(now),
               scheduling::limit_wakeups(origin.limit.enabled(), origin.limit.limit(),
                                         origin.limit.counted_in_flight(now)));
  origin.waiting.hand_out(
      admissible,
      [&origin](const subscriber_state& next) { return next.waiting_on_origin == &origin; },
      [&woken](subscriber_state& next) {
        next.waiting_on_origin = nullptr;
        next.origin_turn = true;
        woken.push_back(&next);
      });
}

std::vector<origin_snapshot> shard_slots::snapshots(std::span<subscriber_state* const> subscribers,
                                                    steady::time_point now) const {
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
  for (const auto* sub : subscribers) {
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
