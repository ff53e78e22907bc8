#pragma once
// Rows still to deliver, per subscriber, for the metrics that alerts use: how many are queued
// and how many are overdue (due for longer than a threshold).
#include <cstdint>
#include <vector>

#include "proto/id_set.hpp"
#include "storage/connection.hpp"

namespace surge::storage {

struct subscriber_backlog {
  std::int64_t subscriber_id = 0;
  std::int64_t queued = 0;   // pending or retry, due or scheduled, leased or not
  std::int64_t overdue = 0;  // of those, due before the given time
};

// On either kind of queue (storage/connection.hpp), as storage/sqlite/backlog.hpp describes them on
// a SQLite file; throws storage::error.
std::vector<subscriber_backlog> backlog_by_subscriber(connection& db, double overdue_before,
                                                      const proto::id_set& which);

}  // namespace surge::storage
