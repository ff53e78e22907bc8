#pragma once
// What a shard knows about partner host names, sans-I/O: the answer to use, or whether a
// lookup must start or is already under way. engine/net/dns_resolver.hpp runs the lookups;
// this decides when one is needed, so the rules (TTL, failures kept briefly, one lookup per
// name at a time) are tested on a simulated clock.
#include <chrono>
#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/config.hpp"
#include "proto/target_policy.hpp"

namespace surge::engine {

// A finished lookup: addresses, or why there are none.
struct dns_answer {
  std::vector<proto::ip_address> addresses;
  std::string error;  // empty when there are addresses
};

class dns_cache {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  enum class step {
    cached,        // `answer` holds the kept answer (addresses or a failure)
    start_lookup,  // nothing kept: the asker starts the lookup, later askers join it
    join_lookup,   // a lookup of the name is under way: wait for it
  };
  struct decision {
    step what;
    const dns_answer* answer = nullptr;  // for `cached`; valid until the next call
  };

  explicit dns_cache(const dns_config& config) : config_(config) {}

  decision ask(const std::string& host, time_point now);
  // The lookup of `host` ended. Addresses are kept for `ttl` held within the configured
  // bounds; a failure (no addresses) for failure_ttl. Returns the answer kept.
  const dns_answer& on_answer(const std::string& host, dns_answer answer, std::chrono::seconds ttl,
                              time_point now);

  std::size_t size() const { return entries_.size(); }
  std::size_t lookups_under_way() const { return under_way_; }

 private:
  struct entry {
    dns_answer answer;
    time_point expires{};
    bool looking_up = false;
  };
  void make_room(time_point now);

  dns_config config_;
  std::unordered_map<std::string, entry> entries_;
  std::size_t under_way_ = 0;
};

}  // namespace surge::engine
