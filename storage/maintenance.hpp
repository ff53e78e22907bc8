#pragma once
// Queue housekeeping the drain does besides claiming: rows nobody can deliver, and when the
// next scheduled retry falls due.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <SQLiteCpp/Database.h>

#include "proto/id_set.hpp"
#include "storage/connection.hpp"

namespace surge::storage {

// Dead-letters due, unleased rows of the chosen subscriber ids whose subscriber does not exist,
// with last_error "unknown subscriber", in one BEGIN IMMEDIATE transaction. Returns the count.
std::int64_t dead_letter_orphans(SQLite::Database& db, double now, const proto::id_set& which);

// Rows whose scheduling columns no claim can ever match, as another program may write them:
// a next_attempt_at that is not a number (text, NULL) is never due; a locked_until that is not a
// number, or lies beyond `lease_horizon`, is a lease nobody will ever release. Each stays pending
// for ever, so it is dead-lettered with last_error naming the column and its value (e.g.
// "malformed next_attempt_at: 'soon'"). Rows under a live, plausible lease are left alone, and
// so are rows under a lease recorded in surge_lease (a Surge drain with a longer --lease).
struct malformed_rows {
  std::int64_t next_attempt_at = 0;  // not a number
  std::int64_t locked_until = 0;     // not a number
  std::int64_t far_lease = 0;        // a number beyond lease_horizon
  std::int64_t total() const { return next_attempt_at + locked_until + far_lease; }
};

// Finds them with a read (one pass over the pending/retry rows of the chosen subscribers, like
// a backlog count, so callers run it seldom), then dead-letters them by id in a short
// BEGIN IMMEDIATE transaction that checks each row again.
malformed_rows dead_letter_malformed(SQLite::Database& db, double now, double lease_horizon,
                                     const proto::id_set& which);

// The earliest moment a pending/retry row of the chosen subscribers that is not leased at `now`
// fell (or falls) due: the later of its next_attempt_at and its created_at, so a row queued with
// next_attempt_at = 0 counts from when it was queued. nullopt when there are none.
std::optional<double> earliest_scheduled(SQLite::Database& db, double now,
                                         const proto::id_set& which);

// Other Surge processes (surge_lease owners other than `self`) holding live leases on rows of
// the chosen subscribers, each with the subscribers concerned, ordered by owner.
struct lease_holder {
  std::string owner;
  std::vector<std::int64_t> subscribers;  // ascending
  std::int64_t rows = 0;
};
std::vector<lease_holder> other_live_owners(SQLite::Database& db, double now,
                                            const proto::id_set& which, const std::string& self);

// The same on either kind of queue (storage/connection.hpp); throw storage::error.
std::vector<lease_holder> other_live_owners(connection& db, double now, const proto::id_set& which,
                                            const std::string& self);

}  // namespace surge::storage
