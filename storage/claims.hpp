#pragma once
// What a claim asks for and hands out, whichever database holds the queue: the claiming
// itself is each backend's (storage/sqlite/claims.hpp, storage/postgres/drain_store.cpp).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "proto/ordered_delivery.hpp"
#include "storage/lease_values.hpp"

namespace surge::storage {

struct claimed_row {
  std::int64_t id = 0;
  std::int64_t subscriber_id = 0;
  std::string event_type;
  std::string payload;             // empty when the payload is over the claim's size cap
  std::int64_t payload_bytes = 0;  // the stored payload's size, measured in SQL
  std::int64_t attempts = 0;
  double next_attempt_at = 0;
  double created_at = 0;
  double lease = 0;  // the locked_until value this process wrote: the fence for outcome writes
  // Coalescing: the created_at of the oldest row merged into this one so far, if any.
  std::optional<double> coalesced_since;
  // A queue shape that stores each row's signature at enqueue (seed001): the stored text, empty
  // when the column is NULL or empty; nullopt where signatures are made per attempt (seed000).
  std::optional<std::string> stored_signature;
  // An ordered subscriber's row (proto/ordered_delivery.hpp): its key, and whether its death
  // stops the key; nullopt for every other subscriber's.
  std::optional<std::string> order_key;
  bool death_stops_key = false;
};

struct subscriber_demand {
  std::int64_t subscriber_id = 0;
  int rows = 0;
  // Tokens asked of its persisted bucket in the same cycle (storage/token_leases.hpp); 0: none;
  // below 0: leased tokens given back.
  double tokens = 0;
  // Refill ahead the ask may take as well, as a debt (proto::take_tokens): the asker's own
  // estimate of how long until it can ask again. The store's own reserve applies when larger.
  double reserve_seconds = 0;
  // An ordered subscriber's rule: only the first unfinished row of each key is claimed.
  std::optional<proto::order_rule> order;
  // A coalescing subscriber's rows are claimed only up to this id: the rows the backlog sweep
  // has already judged against everything queued for their keys. nullopt: no such bound.
  std::optional<std::int64_t> judged_through;
};

struct lease_ref {
  std::int64_t delivery_id = 0;
  double lease = 0;
};

// "surge@<hostname>:<pid>": who holds a lease, as `surge stats` shows it.
std::string default_lease_owner();

}  // namespace surge::storage
