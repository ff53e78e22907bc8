#pragma once
// Coalescing reads and writes on a SQLite queue.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <SQLiteCpp/Database.h>

#include "storage/coalescing.hpp"
#include "storage/connection.hpp"

namespace surge::storage::sqlite {

// One subscriber's rows that are due now and held by nobody (pending or retry,
// next_attempt_at <= now, locked_until <= now), oldest first, at most `limit` rows and about
// `max_total_bytes` of payload (reading stops once that is passed); payloads over
// `max_payload_bytes` are not read. The bound of the read's judgement as storage/coalescing.hpp
// says.
unheld_backlog read_unheld_due_rows(SQLite::Database& db, std::int64_t subscriber_id, double now,
                                    int limit, std::int64_t max_payload_bytes,
                                    std::int64_t max_total_bytes);

// In one BEGIN IMMEDIATE transaction: each row still pending or retry, due and unleased at
// `now` ends done with coalesced_into = replaced_by and last_error "coalesced into delivery N",
// and replaced_by's coalesced_since takes on stands_since; a row whose replacement is no longer
// pending, due and unleased (a drain claimed it since it was read, with what it stood for then)
// is left alone, as are rows leased or finished since they were read. Returns how many were
// marked.
int mark_coalesced(SQLite::Database& db, std::span<const replacement> rows, double now);

}  // namespace surge::storage::sqlite
