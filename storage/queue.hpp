#pragma once
// Producer-side fan-out and queue statistics.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "proto/id_set.hpp"
#include "storage/connection.hpp"

namespace surge::storage {

struct status_counts {
  std::int64_t pending = 0, retry = 0, done = 0, dead = 0;
  std::int64_t coalesced = 0;  // done rows never sent: a newer row went in their place
  std::int64_t due_now = 0;    // pending/retry with next_attempt_at <= now
  std::int64_t leased = 0;     // pending/retry with locked_until > now
  double oldest_due_age = 0;   // now - min(next_attempt_at) over due rows, 0 if none
  // The leased rows by holder: a Surge claimer's owner string ("surge@host:pid"), or
  // lease_owner_other for a lease no Surge claimer recorded (the steady-state drainer).
  std::map<std::string, std::int64_t> leased_by;
};

inline constexpr const char* lease_owner_other = "other";

struct subscriber_counts : status_counts {
  std::int64_t subscriber_id = 0;
};

struct queue_stats {
  status_counts total;
  std::vector<subscriber_counts> per_subscriber;  // ordered by id, only those with rows
};

// The per-subscriber counts in id order, and their sum (both backends read the counts).
queue_stats with_totals(const std::map<std::int64_t, subscriber_counts>& by_subscriber);

// On either kind of queue (storage/connection.hpp), as storage/sqlite/queue.hpp describes them on a
// SQLite file; throw storage::error.
std::int64_t emit_event(connection& db, std::string_view event_type, std::string_view payload,
                        double now, int count = 1);
queue_stats read_stats(connection& db, double now, const proto::id_set& which = {});
std::int64_t count_outstanding(connection& db, double now, const proto::id_set& which = {});

}  // namespace surge::storage
