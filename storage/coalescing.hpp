#pragma once
// Coalescing over a subscriber's whole due backlog: the rows nobody holds are
// read, the rule is applied in the caller (proto/coalesce), and the rows it replaces are marked
// done, each still fenced on being due and unleased when the write happens.
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

struct replacement {
  std::int64_t id = 0;           // the row that is not sent
  std::int64_t replaced_by = 0;  // the newer row sent in its place
  // The created_at of the oldest row `replaced_by` stands for once `id` is merged into it.
  double stands_since = 0;
};

// The seed000 shape on SQLite and PostgreSQL (storage::error, kind unsupported, on seed001).
std::vector<backlog_row> read_unheld_due_rows(connection& db, std::int64_t subscriber_id,
                                              double now, int limit, std::int64_t max_payload_bytes,
                                              std::int64_t max_total_bytes);
int mark_coalesced(connection& db, std::span<const replacement> rows, double now);

}  // namespace surge::storage
