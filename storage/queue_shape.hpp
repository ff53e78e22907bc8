#pragma once
// The two published shapes of this site's queue, and how Surge tells which one a database holds.
// Seed 000: webhook_subscriber / webhook_delivery (REAL times, status pending|retry|done|dead, the
// bucket in the subscriber row). Seed 001: webhook_subscribers / webhook_deliveries /
// webhook_buckets (integer-second times, state pending|delivered|dead, stored signatures).
// Surge drains either with the same engine; storage/ maps names, states, time units and rates.
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "proto/retry_policy.hpp"
#include "storage/error.hpp"

namespace surge::storage {

enum class queue_shape { seed000, seed001 };

// "seed000" or "seed001" (what --queue-shape and the `queue-shape` config key take).
std::optional<queue_shape> parse_queue_shape(std::string_view text);
std::string_view to_string(queue_shape shape);
// "seed 000 (webhook_subscriber, webhook_delivery)": for messages.
std::string describe(queue_shape shape);

// A table the database holds, with its columns.
struct found_table {
  std::string name;
  std::vector<std::string> columns;
};

struct shape_finding {
  std::optional<queue_shape> shape;  // set when the queue can be used as that shape
  bool empty = false;                // no tables at all
  // Why it cannot be used, naming what was found and what is missing; empty when `shape` is set.
  std::string problem;
};

// Which shape a database holding `tables` is. `named`: the operator's --queue-shape, required
// when the database holds tables of both shapes; a named shape must be complete, whatever else
// is there. A shape is complete when all its tables exist with every column its programs use.
// `location` (printable) goes into the messages.
shape_finding classify_queue(std::span<const found_table> tables, std::optional<queue_shape> named,
                             std::string_view location);

// Why a PostgreSQL queue at `location` cannot be used as seed001: that shape is a SQLite queue.
std::string seed001_not_on_postgres(std::string_view location);

// Whether `tables` holds any table of `shape`.
bool holds_table_of(std::span<const found_table> tables, queue_shape shape);

// `finding`'s shape; throws storage::error (kind bad_shape) with its problem when there is none.
queue_shape usable_shape(const shape_finding& finding);

// The tables of `shape` and the columns of each that its programs read or write.
struct shape_table {
  std::string_view name;
  std::vector<std::string_view> columns;
};
const std::vector<shape_table>& tables_of(queue_shape shape);

// The retry rules a drain applies on a queue of this shape unless flags say otherwise: Surge's
// own on seed 000 (8 attempts, 24 h, 1 s doubling to 1 h with equal jitter), and on seed 001
// what its write-up publishes for its own worker (12 attempts, 24 h, 2^attempt s plus 0-30 s,
// at most 1 h), so that a row fares the same whichever drainer sends it.
proto::retry_config retry_defaults(queue_shape shape);

}  // namespace surge::storage
