#include "proto/ownership.hpp"

#include <algorithm>
#include <unordered_map>

namespace surge::proto {
namespace {

// Rendezvous (highest random weight) hashing: FNV-1a over the name, then the id, and a final
// mix so that names differing in one character rank subscribers independently.
std::uint64_t rendezvous_weight(std::string_view drainer, std::int64_t subscriber) {
  std::uint64_t hash = 1469598103934665603ull;
  auto mix_byte = [&hash](unsigned char byte) {
    hash ^= byte;
    hash *= 1099511628211ull;
  };
  for (const char c : drainer) mix_byte(static_cast<unsigned char>(c));
  mix_byte(0);
  auto id = static_cast<std::uint64_t>(subscriber);
  for (int i = 0; i < 8; ++i, id >>= 8) mix_byte(static_cast<unsigned char>(id & 0xff));
  hash ^= hash >> 33;
  hash *= 0xff51afd7ed558ccdull;
  hash ^= hash >> 33;
  return hash;
}

}  // namespace

std::vector<std::string> assign_owners(std::span<const std::int64_t> subscribers,
                                       std::span<const live_drainer> live) {
  std::vector<std::string> owners(subscribers.size());
  if (live.empty()) return owners;
  std::size_t assignable = 0;
  for (const auto id : subscribers) {
    if (std::any_of(live.begin(), live.end(),
                    [id](const live_drainer& d) { return d.subscribers.contains(id); })) {
      ++assignable;
    }
  }
  // An even share: every drainer gets `base`, and `extra` of them one more.
  const std::size_t base = assignable / live.size();
  const std::size_t extra = assignable % live.size();
  std::size_t extra_given = 0;
  auto under_share = [&](std::size_t count) {
    return count < base || (count == base && extra_given < extra);
  };
  std::vector<std::size_t> load(live.size(), 0);
  std::vector<std::pair<std::uint64_t, std::size_t>> ranked;
  for (std::size_t i = 0; i < subscribers.size(); ++i) {
    ranked.clear();
    for (std::size_t d = 0; d < live.size(); ++d) {
      if (live[d].subscribers.contains(subscribers[i])) {
        ranked.emplace_back(rendezvous_weight(live[d].name, subscribers[i]), d);
      }
    }
    if (ranked.empty()) continue;
    // Ties (equal weights) fall to the name, so every drainer breaks them the same way.
    std::sort(ranked.begin(), ranked.end(), [&live](const auto& a, const auto& b) {
      if (a.first != b.first) return a.first > b.first;
      return live[a.second].name < live[b.second].name;
    });
    // With --subscribers selections that differ, no drainer allowed may be under its share;
    // the subscriber then goes to its first-ranked drainer anyway.
    std::size_t chosen = ranked.front().second;
    for (const auto& [weight, d] : ranked) {
      if (under_share(load[d])) {
        chosen = d;
        break;
      }
    }
    if (load[chosen] == base) ++extra_given;
    ++load[chosen];
    owners[i] = live[chosen].name;
  }
  return owners;
}

ownership_plan plan_ownership(std::string_view self, std::span<const std::int64_t> subscribers,
                              std::span<const live_drainer> live,
                              std::span<const subscriber_owner> owners, double now) {
  ownership_plan plan;
  std::unordered_map<std::int64_t, const subscriber_owner*> current;
  for (const auto& owner : owners) {
    if (owner.expires_at > now) current[owner.subscriber_id] = &owner;
  }
  const auto assigned = assign_owners(subscribers, live);
  std::unordered_map<std::int64_t, bool> listed;
  for (std::size_t i = 0; i < subscribers.size(); ++i) {
    const auto id = subscribers[i];
    listed[id] = true;
    const auto found = current.find(id);
    const bool mine = found != current.end() && found->second->drainer == self;
    const bool free = found == current.end();
    if (assigned[i] == self) {
      if (mine) plan.keep.push_back(id);
      if (free) plan.take.push_back(id);
      if (!mine && !free) plan.awaited.push_back(id);
    } else if (mine) {
      plan.release.push_back(id);
    }
  }
  // Owned subscribers that are gone from the table are let go too.
  for (const auto& [id, owner] : current) {
    if (owner->drainer == self && !listed.contains(id)) plan.release.push_back(id);
  }
  std::sort(plan.release.begin(), plan.release.end());
  return plan;
}

bool heartbeat_is_enough(const std::optional<full_renewal>& last, const renewal_view& view,
                         double now, double alive_until, double full_every) {
  if (!last || last->awaiting || now >= alive_until || now - last->at >= full_every) return false;
  const auto& before = last->view;
  if (before.subscriber_count != view.subscriber_count ||
      before.highest_subscriber_id != view.highest_subscriber_id ||
      before.live.size() != view.live.size() || last->owned_after != view.owned_by_self) {
    return false;
  }
  for (std::size_t i = 0; i < view.live.size(); ++i) {
    if (before.live[i].name != view.live[i].name ||
        before.live[i].subscribers.to_string() != view.live[i].subscribers.to_string() ||
        before.live[i].subscribers.all() != view.live[i].subscribers.all()) {
      return false;
    }
  }
  return true;
}

}  // namespace surge::proto
