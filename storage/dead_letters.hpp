#pragma once
// Dead-lettered rows: looking at them, and giving them another go (`surge dead`).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "proto/id_set.hpp"
#include "storage/connection.hpp"

namespace surge::storage {

struct dead_selection {
  proto::id_set subscribers;            // default: every subscriber
  proto::id_set ids;                    // default: every row (`dead replay --id`)
  std::optional<double> created_since;  // rows with created_at >= this
  std::optional<std::int64_t> limit;    // the newest N (by created_at, then id)
};

struct dead_row {
  std::int64_t id = 0;
  std::int64_t subscriber_id = 0;
  std::string event_type;
  std::int64_t attempts = 0;
  int last_status = 0;     // 0: no response (or none recorded)
  std::string last_error;  // empty when none recorded
  double created_at = 0;
};

// One delivery in full, whatever its status (`surge dead show`).
struct delivery_detail {
  std::int64_t id = 0;
  std::int64_t subscriber_id = 0;
  std::string event_type;
  std::string status;  // as the shape writes it: pending, retry, done, delivered, dead
  std::int64_t attempts = 0;
  int last_status = 0;     // 0: no response (or none recorded)
  std::string last_error;  // empty when none recorded
  double created_at = 0;
  std::optional<double> finished_at;  // when its last recorded attempt ended
  std::string payload;                // the exact bytes stored

  bool dead() const { return status == "dead"; }
};

struct replay_report {
  std::int64_t replayed = 0;
  // Subscribers of replayed rows that are inactive (their rows wait until they are enabled) or
  // no longer exist (the drain dead-letters their rows again).
  std::vector<std::int64_t> inactive_subscribers;
};

// On either kind of queue (storage/connection.hpp), as storage/sqlite/dead_letters.hpp describes
// them on a SQLite file; throw storage::error.
std::vector<dead_row> list_dead(connection& db, const dead_selection& which);
replay_report replay_dead(connection& db, const dead_selection& which, double now);
// The delivery with this id, nullopt when there is none. `finished_at` comes from the newest
// surge_attempt record of the row (one scan of that table: it has no index by delivery).
std::optional<delivery_detail> find_delivery(connection& db, std::int64_t id);

}  // namespace surge::storage
