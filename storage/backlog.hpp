#pragma once
// Rows still to deliver, per subscriber, for the metrics that alerts use: how many are queued
// and how many are overdue (due for longer than a threshold).
#include <cstdint>
#include <vector>

#include <SQLiteCpp/Database.h>

#include "proto/id_set.hpp"
#include "storage/connection.hpp"

namespace surge::storage {

struct subscriber_backlog {
  std::int64_t subscriber_id = 0;
  std::int64_t queued = 0;   // pending or retry, due or scheduled, leased or not
  std::int64_t overdue = 0;  // of those, due before the given time
};

// Per subscriber: rows queued, and those overdue (due, by the later of next_attempt_at and
// created_at, before `overdue_before`). One pass over the per-subscriber due index (a read
// transaction: it blocks no writer). About 0.3 s per million queued rows, so callers sample it
// every few seconds, not per scrape.
std::vector<subscriber_backlog> backlog_by_subscriber(SQLite::Database& db, double overdue_before,
                                                      const proto::id_set& which);

// The same on either kind of queue (storage/connection.hpp); throws storage::error.
std::vector<subscriber_backlog> backlog_by_subscriber(connection& db, double overdue_before,
                                                      const proto::id_set& which);

}  // namespace surge::storage
