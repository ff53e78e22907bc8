#pragma once
// A subscriber's claimed rows waiting to go, and the pure rules that pick what the next request
// carries: whether a row may be sent at all, whether its lease still covers an attempt, which
// rows join a batch (several rows in one request, one token and one slot), and which rows
// coalescing merges into a newer one of the same key. No I/O and no clock: the shard's core
// passes the time and does the accounting.
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "engine/memory/node_cache.hpp"
#include "engine/shard/delivery.hpp"
#include "proto/coalesce.hpp"
#include "storage/claims.hpp"

namespace surge::engine {

// A subscriber's claimed rows, oldest first; its nodes come back from the shard's own cache.
using ready_rows = std::deque<storage::claimed_row, node_cache_allocator<storage::claimed_row>>;

// What every ready row is checked against before it may go.
struct row_checks {
  std::size_t max_payload_bytes = 0;
  // What an attempt needs of the lease: the attempt timeout and a second to write its outcome.
  std::chrono::duration<double> lease_margin{0};
  // The seed001 shape's retry window: a row enqueued longer ago is refused. None: no window.
  std::optional<double> retry_window_seconds;

  // Why the row cannot be sent (delivery_refusal, or the retry window), empty when it can.
  std::string refusal(const storage::claimed_row& row, double now_unix) const;
  // Its lease would run out before an attempt could finish and be written.
  bool lease_too_short(const storage::claimed_row& row, double now_unix) const {
    return now_unix + lease_margin.count() > row.lease;
  }
};

// The subscriber's batch: at most `rows` rows and a body of at most `bytes`.
struct batch_limits {
  int rows = 1;
  std::int64_t bytes = 0;
};

// Whether waiting would not make the front's batch bigger: it has `limits.rows` rows, or the
// next row cannot join it.
bool batch_full(const ready_rows& ready, batch_limits limits, const row_checks& checks,
                double now_unix);

// Takes the next request's rows from the front of `ready`: a batch when batching is on and the
// front row may be a batch element, else the front row alone (`batched` says which).
attempt_rows take_request_rows(ready_rows& ready, batch_limits limits, const row_checks& checks,
                               double now_unix, bool& batched);

// A row coalescing merged into a newer one of its key: the row, the one it went into, and since
// when the chain merged into it stood (the coalesced outcome carries both).
struct coalesced_row {
  storage::claimed_row row;
  std::int64_t into = 0;
  double since = 0;
};

// Of the rows sharing a key (proto::plan_coalescing), only the newest stays in `ready`; the rows
// kept take on what the rows merged into them stood for, so a later merge counts the whole
// chain. The merged rows are appended to `merged`, in queue order.
void coalesce(ready_rows& ready, const proto::coalesce_rule& rule,
              std::vector<coalesced_row>& merged);

}  // namespace surge::engine
