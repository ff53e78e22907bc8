#pragma once
// Queue housekeeping the drain does besides claiming: rows nobody can deliver, and when the
// next scheduled retry falls due.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "proto/id_set.hpp"
#include "storage/connection.hpp"

namespace surge::storage {

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

// Other Surge processes (surge_lease owners other than `self`) holding live leases on rows of
// the chosen subscribers, each with the subscribers concerned, ordered by owner.
struct lease_holder {
  std::string owner;
  std::vector<std::int64_t> subscribers;  // ascending
  std::int64_t rows = 0;
};

// On either kind of queue (storage/connection.hpp), as storage/sqlite/maintenance.hpp describes
// them on a SQLite file; throw storage::error.
std::vector<lease_holder> other_live_owners(connection& db, double now, const proto::id_set& which,
                                            const std::string& self);

}  // namespace surge::storage
