#include "engine/net/dns_cache.hpp"

#include <algorithm>
#include <utility>

namespace surge::engine {

dns_cache::decision dns_cache::ask(const std::string& host, time_point now) {
  auto found = entries_.find(host);
  if (found != entries_.end()) {
    auto& e = found->second;
    if (e.looking_up) return {step::join_lookup};
    if (now < e.expires) return {step::cached, &e.answer};
    // Expired: looked up again, the old answer no longer offered.
    e.looking_up = true;
    ++under_way_;
    return {step::start_lookup};
  }
  make_room(now);
  entries_[host].looking_up = true;
  ++under_way_;
  return {step::start_lookup};
}

const dns_answer& dns_cache::on_answer(const std::string& host, dns_answer answer,
                                       std::chrono::seconds ttl, time_point now) {
  auto& e = entries_[host];
  if (e.looking_up) {
    e.looking_up = false;
    --under_way_;
  }
  const auto kept_for =
      answer.addresses.empty()
          ? std::chrono::duration_cast<std::chrono::steady_clock::duration>(config_.failure_ttl)
          : std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                std::clamp(ttl, config_.min_ttl, std::max(config_.min_ttl, config_.max_ttl)));
  e.expires = now + kept_for;
  e.answer = std::move(answer);
  return e.answer;
}

void dns_cache::make_room(time_point now) {
  if (entries_.size() < std::max<std::size_t>(config_.max_hosts, 1)) return;
  // Rare (more names than max_hosts): one pass drops what expired, and if nothing did, the
  // kept answer that expires soonest. Lookups under way stay: someone waits for them.
  std::erase_if(entries_, [now](const auto& kv) {
    return !kv.second.looking_up && kv.second.expires <= now;
  });
  if (entries_.size() < std::max<std::size_t>(config_.max_hosts, 1)) return;
  auto soonest = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->second.looking_up) continue;
    if (soonest == entries_.end() || it->second.expires < soonest->second.expires) soonest = it;
  }
  if (soonest != entries_.end()) entries_.erase(soonest);
}

}  // namespace surge::engine
