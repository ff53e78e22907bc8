#pragma once
// Ordered delivery's settings and stopped keys (proto/ordered_delivery.hpp), kept in Surge's own
// tables surge_subscriber_order and surge_stopped_key on either shape.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "proto/id_set.hpp"
#include "proto/ordered_delivery.hpp"
#include "storage/connection.hpp"

namespace surge::storage {

// A key a dead row stopped: its later rows wait until the row is replayed (`surge dead replay`)
// or the key is resumed past it (`surge subscriber resume-key`).
struct stopped_key {
  std::int64_t subscriber_id = 0;
  std::string key;  // the JSON text at the subscriber's pointer ("" : rows without the key)
  std::int64_t delivery_id = 0;  // the row that died
  double stopped_at = 0;
};

// On either kind of queue; throw storage::error.
//
// Makes a subscriber ordered (rule) or not (nullopt). The first ordered subscriber of a queue
// also gets the index the ordered claim reads (each subscriber's unfinished rows in enqueue
// order); the last one to stop being ordered drops it, so a queue without ordered subscribers
// pays nothing for it. Turning order off also resumes the subscriber's stopped keys.
void set_subscriber_order(connection& db, std::int64_t subscriber_id,
                          const std::optional<proto::order_rule>& rule);
std::vector<stopped_key> list_stopped_keys(connection& db, const proto::id_set& which = {});
// Resumes a stopped key (nullopt: every stopped key of the subscriber) past its dead row, which
// stays dead. Returns how many keys it resumed.
int resume_stopped_keys(connection& db, std::int64_t subscriber_id,
                        const std::optional<std::string>& key);

}  // namespace surge::storage
