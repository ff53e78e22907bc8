#pragma once
// Queue housekeeping on a SQLite queue.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <SQLiteCpp/Database.h>

#include "proto/id_set.hpp"
#include "storage/connection.hpp"
#include "storage/maintenance.hpp"
#include "storage/sqlite/delivery_table.hpp"

namespace surge::storage::sqlite {

// Dead-letters due, unleased rows of the chosen subscriber ids whose subscriber does not exist,
// with last_error "unknown subscriber", in one BEGIN IMMEDIATE transaction. Returns the count.
std::int64_t dead_letter_orphans(SQLite::Database& db, double now, const proto::id_set& which,
                                 const delivery_table& table = seed000_deliveries());

// Finds them with a read (one pass over the pending/retry rows of the chosen subscribers, like
// a backlog count, so callers run it seldom), then dead-letters them by id in a short
// BEGIN IMMEDIATE transaction that checks each row again.
malformed_rows dead_letter_malformed(SQLite::Database& db, double now, double lease_horizon,
                                     const proto::id_set& which,
                                     const delivery_table& table = seed000_deliveries());

// The earliest moment an outstanding row of the chosen subscribers that is not leased at `now`
// fell (or falls) due: the later of its next attempt and its creation, so a row queued with
// next_attempt_at = 0 counts from when it was queued. nullopt when there are none.
std::optional<double> earliest_scheduled(SQLite::Database& db, double now,
                                         const proto::id_set& which,
                                         const delivery_table& table = seed000_deliveries());

std::vector<lease_holder> other_live_owners(SQLite::Database& db, double now,
                                            const proto::id_set& which, const std::string& self,
                                            const delivery_table& table = seed000_deliveries());

}  // namespace surge::storage::sqlite
