#pragma once
// Coalescing over a subscriber's whole due backlog: the rows nobody holds are
// read, the rule is applied in the caller (proto/coalesce), and the rows it replaces are marked
// done, each still fenced on being due and unleased when the write happens.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <SQLiteCpp/Database.h>
#include "storage/connection.hpp"

namespace surge::storage {

struct backlog_row {
  std::int64_t id = 0;
  std::string event_type;
  double created_at = 0;
  std::string payload;  // empty when over the size cap (such a row is never coalesced)
  std::optional<double> coalesced_since;  // the oldest row merged into it so far, if any
};

// One subscriber's rows that are due now and held by nobody (pending or retry,
// next_attempt_at <= now, locked_until <= now), oldest first, at most `limit` rows and about
// `max_total_bytes` of payload (reading stops once that is passed); payloads over
// `max_payload_bytes` are not read.
std::vector<backlog_row> read_unheld_due_rows(SQLite::Database& db, std::int64_t subscriber_id,
                                              double now, int limit, std::int64_t max_payload_bytes,
                                              std::int64_t max_total_bytes);

struct replacement {
  std::int64_t id = 0;           // the row that is not sent
  std::int64_t replaced_by = 0;  // the newer row sent in its place
  // The created_at of the oldest row `replaced_by` stands for once `id` is merged into it.
  double stands_since = 0;
};

// In one BEGIN IMMEDIATE transaction: each row still pending or retry, due and unleased at
// `now` ends done with coalesced_into = replaced_by and last_error "coalesced into delivery N",
// and replaced_by's coalesced_since takes on stands_since; a row whose replacement is no longer
// pending, due and unleased (a drain claimed it since it was read, with what it stood for then)
// is left alone, as are rows leased or finished since they were read. Returns how many were
// marked.
int mark_coalesced(SQLite::Database& db, std::span<const replacement> rows, double now);

// SQLite only so far (storage::error, kind unsupported, on PostgreSQL).
std::vector<backlog_row> read_unheld_due_rows(connection& db, std::int64_t subscriber_id,
                                              double now, int limit, std::int64_t max_payload_bytes,
                                              std::int64_t max_total_bytes);
int mark_coalesced(connection& db, std::span<const replacement> rows, double now);

}  // namespace surge::storage
