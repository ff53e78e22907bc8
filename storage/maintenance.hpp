#pragma once
// Queue housekeeping the drain does besides claiming: rows nobody can deliver, and when the
// next scheduled retry falls due.
#include <cstdint>
#include <optional>

#include <SQLiteCpp/Database.h>

#include "proto/id_set.hpp"

namespace surge::storage {

// Dead-letters due, unleased rows of the chosen subscriber ids whose subscriber does not exist,
// with last_error "unknown subscriber", in one BEGIN IMMEDIATE transaction. Returns the count.
std::int64_t dead_letter_orphans(SQLite::Database& db, double now, const proto::id_set& which);

// The earliest next_attempt_at among pending/retry rows of the chosen subscribers that are not
// leased at `now`, or nullopt when there are none.
std::optional<double> earliest_scheduled(SQLite::Database& db, double now,
                                         const proto::id_set& which);

}  // namespace surge::storage
