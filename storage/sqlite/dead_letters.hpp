#pragma once
// Dead-lettered rows on a SQLite queue.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "proto/id_set.hpp"
#include "storage/connection.hpp"
#include "storage/dead_letters.hpp"
#include "storage/sqlite/delivery_table.hpp"

namespace surge::storage::sqlite {

// Dead rows matching `which`, newest first (by creation, then id, descending).
std::vector<dead_row> list_dead(SQLite::Database& db, const dead_selection& which,
                                const delivery_table& table = seed000_deliveries());

// Puts the dead rows matching `which` back to pending: attempts 0, due at `now` (in whole
// seconds on a shape that keeps those), no lease, and created at `now`, so the row gets a whole new
// retry window (both drainers measure the window from created_at; a replayed day-old row would
// otherwise die after one attempt). last_status and last_error stay as history until the next
// attempt overwrites them. One BEGIN IMMEDIATE transaction.
replay_report replay_dead(SQLite::Database& db, const dead_selection& which, double now,
                          const delivery_table& table = seed000_deliveries());

std::optional<delivery_detail> find_delivery(SQLite::Database& db, std::int64_t id,
                                             const delivery_table& table = seed000_deliveries());

// One delivery from a row of columns id, subscriber_id, event_type, status, attempts,
// last_status, last_error, created_at, finished_at and payload, in that order: the shape
// every SQLite queue shape's find_delivery selects.
delivery_detail delivery_detail_from(SQLite::Statement& row);

}  // namespace surge::storage::sqlite
