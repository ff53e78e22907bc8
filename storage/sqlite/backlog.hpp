#pragma once
// The backlog sample on a SQLite queue.
#include <cstdint>
#include <vector>

#include <SQLiteCpp/Database.h>

#include "proto/id_set.hpp"
#include "storage/backlog.hpp"
#include "storage/connection.hpp"
#include "storage/sqlite/delivery_table.hpp"

namespace surge::storage::sqlite {

// Per subscriber: rows queued, and those overdue (due, by the later of next_attempt_at and
// creation, before `overdue_before`). One pass over the per-subscriber due index (a read
// transaction: it blocks no writer). About 0.3 s per million queued rows, so callers sample it
// every few seconds, not per scrape.
std::vector<subscriber_backlog> backlog_by_subscriber(
    SQLite::Database& db, double overdue_before, const proto::id_set& which,
    const delivery_table& table = seed000_deliveries());

}  // namespace surge::storage::sqlite
