#pragma once
// Producer-side fan-out and queue statistics on a SQLite queue.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <SQLiteCpp/Database.h>

#include "proto/id_set.hpp"
#include "storage/connection.hpp"
#include "storage/sqlite/delivery_table.hpp"
#include "storage/queue.hpp"

namespace surge::storage::sqlite {

// Inserts one pending row per active subscriber whose event_types match, `count` times, in one
// BEGIN IMMEDIATE transaction. Returns the number of rows inserted.
std::int64_t emit_event(SQLite::Database& db, std::string_view event_type, std::string_view payload,
                        double now, int count = 1);

// Reads every row of the chosen subscribers, finished ones included (about a microsecond per row
// on a 1M-row file), plus the pending/retry rows once more to attribute the leased ones: call it
// on its own connection or rarely, not between claims and outcomes.
queue_stats read_stats(SQLite::Database& db, double now, const proto::id_set& which = {});

// Adds to each subscriber's counts who holds its leased rows: a lease a Surge claim recorded
// (surge_lease names its owner), or anyone else's.
void add_lease_holders(SQLite::Database& db, double now, const proto::id_set& which,
                       const delivery_table& table,
                       std::map<std::int64_t, subscriber_counts>& by_subscriber);

// Rows of the chosen subscribers that are due now or still leased (by anyone): the drain is
// finished when this is 0 and nothing is buffered or in flight.
std::int64_t count_outstanding(SQLite::Database& db, double now, const proto::id_set& which = {},
                               const delivery_table& table = seed000_deliveries());

}  // namespace surge::storage::sqlite
