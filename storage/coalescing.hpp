#pragma once
// Coalescing over a subscriber's whole due backlog: the rows nobody holds are
// read, the rule is applied in the caller (proto/coalesce), and the rows it replaces are marked
// done, each still fenced on being due and unleased when the write happens.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "storage/connection.hpp"

namespace surge::storage {

struct backlog_row {
  std::int64_t id = 0;
  std::string event_type;
  double created_at = 0;
  std::string payload;  // empty when over the size cap (such a row is never coalesced)
  std::optional<double> coalesced_since;  // the oldest row merged into it so far, if any
};

// What one sweep read of a subscriber, and how far its judgement holds: every row due and held by
// nobody at or below `judged_through` was among `rows` (up to the read's bounds: past them, the
// bound is the highest id read). Rows queued later lie above it, and a claim leaves them until
// the next sweep has judged them (storage::subscriber_demand::judged_through).
struct unheld_backlog {
  std::vector<backlog_row> rows;
  std::int64_t judged_through = 0;
};

struct replacement {
  std::int64_t id = 0;           // the row that is not sent
  std::int64_t replaced_by = 0;  // the newer row sent in its place
  // The created_at of the oldest row `replaced_by` stands for once `id` is merged into it.
  double stands_since = 0;
};

// A read cut short by its bounds judged the rows it read, up to the highest of their ids.
inline std::int64_t highest_id_read(std::span<const backlog_row> rows, std::int64_t newest) {
  std::int64_t highest = 0;
  for (const auto& row : rows) highest = std::max(highest, row.id);
  return std::min(highest, newest);
}

// The seed000 shape on SQLite and PostgreSQL (storage::error, kind unsupported, on seed001).
unheld_backlog read_unheld_due_rows(connection& db, std::int64_t subscriber_id, double now,
                                    int limit, std::int64_t max_payload_bytes,
                                    std::int64_t max_total_bytes);
int mark_coalesced(connection& db, std::span<const replacement> rows, double now);

}  // namespace surge::storage
