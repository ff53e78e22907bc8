#pragma once
// What a subscriber's row means for sending: the settings a shard derives from it, and whether
// its rows can be sent now. Both the shards and the storage thread derive them (the storage
// thread to tell --until-drained which rows it waits for), so they live beside neither.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/config.hpp"
#include "proto/batch.hpp"
#include "proto/coalesce.hpp"
#include "proto/extra_headers.hpp"
#include "proto/ordered_delivery.hpp"
#include "proto/signing.hpp"
#include "proto/target_policy.hpp"
#include "storage/subscribers.hpp"

namespace surge::engine {

struct client_identity;  // engine/net/client_identity.hpp

struct subscriber_settings {
  std::int64_t id = 0;
  std::string url;
  // Shared so that an attempt in flight keeps the target it started with when a reload swaps
  // the settings underneath it.
  std::shared_ptr<const proto::target> target;
  std::shared_ptr<const proto::signer> signer;
  double rate = 0;
  double burst = 1;
  bool active = true;
  int in_flight_cap = 1;
  // Why rows of this subscriber cannot be sent (bad URL, bad secret); empty if fine. They are
  // dead-lettered with this reason. Inactive is not unusable: it means paused.
  std::string unusable_reason;
  // Why its rate or burst cannot be used (not a number, negative, ...); empty if fine. Such a
  // subscriber is paused (rate 0) until the table is fixed: its rows stay queued.
  std::string limits_problem;
  // Batches: rows per request (1: one row per request, no batch format), the body's byte cap,
  // and how long a partial batch may wait for more rows.
  int batch_rows = 1;
  std::int64_t batch_bytes = proto::max_batch_bytes;
  std::chrono::steady_clock::duration batch_linger{};
  std::optional<proto::coalesce_rule> coalesce;  // nullopt: off
  // Ordered delivery per key (proto/ordered_delivery.hpp), claimed by its rule in storage;
  // nullopt: unordered.
  std::optional<proto::order_rule> order;
  // Stored batch, coalescing or order values that cannot be used, and what is done instead;
  // empty if fine. Logged once per value, like limits_problem.
  std::string relief_problem;
  // What the partner requires besides the signature: headers sent on every request after
  // Surge's own (checked by proto::extra_header_problem), and the client certificate its TLS
  // connections present (null: none). Shared, like the target, with attempts in flight.
  std::shared_ptr<const std::vector<proto::header_field>> extra_headers;
  std::shared_ptr<const client_identity> identity;
  // The egress proxy its connections leave through (null: the drain's --proxy, or none).
  std::shared_ptr<const proto::proxy_address> proxy;
  // Why those credentials cannot be used (a refused header, an unreadable or mismatched
  // certificate or key); empty if fine. Such a subscriber is held, as for limits_problem: its
  // rows stay queued (sent without what the partner requires they would only be refused), the
  // reason is logged once, and --until-drained does not wait for them.
  std::string credentials_problem;
};

inline std::span<const proto::header_field> extra_headers_of(const subscriber_settings& settings) {
  if (!settings.extra_headers) return {};
  return {settings.extra_headers->data(), settings.extra_headers->size()};
}

subscriber_settings derive_settings(const storage::subscriber_row& row,
                                    const scheduler_config& config);

// What is wrong with the row's rate_per_sec or burst, quoting the stored value; empty if fine.
std::string limits_problem(const storage::subscriber_row& row);

// Whether the drain can send this subscriber's rows now: active, with usable limits and a rate
// above 0. --until-drained does not wait for the rows of one that cannot (they stay queued).
bool sends_now(const storage::subscriber_row& row);

}  // namespace surge::engine
