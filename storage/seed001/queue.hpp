#pragma once
// The second published queue shape ("seed 001") on SQLite: the queue functions that differ from
// seed000's in more than names, with the same contracts (storage/queue.hpp, subscribers.hpp),
// reached through storage/sqlite/queue_shape.hpp. What differs only in
// names (dead letters, the audit, maintenance, the backlog sample, retention) runs seed000's
// statements on this shape's storage/sqlite/delivery_table.hpp. Private to storage/.
//
// How the shape maps onto the neutral rows:
//   webhook_subscribers: endpoint is the URL, events (a JSON array) the filter as stored,
//     rate_per_min / 60 the rate per second, signing "stored"; its persisted bucket is the
//     subscriber's webhook_buckets row (none yet: a full bucket).
//   webhook_deliveries: attempt is attempts, enqueued_at created_at, next_attempt
//     next_attempt_at, leased_until the lease, signature the stored signature; state pending is
//     pending (never tried) or retry (tried), delivered is done, dead is dead.
//   Times are whole seconds: a row is due once next_attempt <= now, and free, as the shape's own
//     worker reads it, once leased_until < now in whole seconds. Surge's lease values keep the
//     fraction that makes them its own (storage/lease_values.hpp); retries are scheduled at
//     whole seconds, rounded up.
//   Why a row failed or died (last status, last error) goes to Surge's own table
//     surge_delivery_note; nothing is added to the shape's tables.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <SQLiteCpp/Database.h>

#include "proto/id_set.hpp"
#include "storage/sqlite/queue.hpp"
#include "storage/sqlite/ordered_keys.hpp"
#include "storage/sqlite/subscribers.hpp"

namespace surge::storage::sqlite::seed001 {

// Surge's own tables and its per-subscriber due index, at the latest schema version, in one
// BEGIN IMMEDIATE transaction; the shape's tables are never created or changed.
int migrate(SQLite::Database& db);

std::int64_t emit_event(SQLite::Database& db, std::string_view event_type, std::string_view payload,
                        double now, int count);
queue_stats read_stats(SQLite::Database& db, double now, const proto::id_set& which);

std::vector<subscriber_row> load_subscribers(SQLite::Database& db, const proto::id_set& which);
std::optional<subscriber_row> load_subscriber(SQLite::Database& db, std::int64_t id);
std::int64_t add_subscriber(SQLite::Database& db, const subscriber_row& row);
bool update_subscriber(SQLite::Database& db, const subscriber_row& row);
bool set_subscriber_active(SQLite::Database& db, std::int64_t id, bool active);
// The index ordered claims read on webhook_deliveries (storage/sqlite/ordered_keys.hpp).
const ordered_index& ordered_claim_index();

}  // namespace surge::storage::sqlite::seed001
