#pragma once
// Dead-lettered rows: looking at them, and giving them another go (`surge dead`).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <SQLiteCpp/Database.h>

#include "proto/id_set.hpp"
#include "storage/connection.hpp"

namespace surge::storage {

struct dead_selection {
  proto::id_set subscribers;            // default: every subscriber
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

// Dead rows matching `which`, newest first (created_at, then id, descending).
std::vector<dead_row> list_dead(SQLite::Database& db, const dead_selection& which);

struct replay_report {
  std::int64_t replayed = 0;
  // Subscribers of replayed rows that are inactive (their rows wait until they are enabled) or
  // no longer exist (the drain dead-letters their rows again).
  std::vector<std::int64_t> inactive_subscribers;
};

// Puts the dead rows matching `which` back to pending: attempts 0, due at `now`, no lease, and
// created_at = `now`, so the row gets a whole new retry window (both drainers measure the window
// from created_at; a replayed day-old row would otherwise die after one attempt). last_status
// and last_error stay as history until the next attempt overwrites them. One BEGIN IMMEDIATE
// transaction.
replay_report replay_dead(SQLite::Database& db, const dead_selection& which, double now);

// The same on either kind of queue (storage/connection.hpp); throw storage::error.
std::vector<dead_row> list_dead(connection& db, const dead_selection& which);
replay_report replay_dead(connection& db, const dead_selection& which, double now);

}  // namespace surge::storage
