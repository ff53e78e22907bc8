#pragma once
// The ordered claim's walk, whichever database holds the queue (proto/ordered_delivery.hpp has
// the rule): each backend reads a subscriber's unfinished rows in id order a page at a time, and
// this chooses the rows to lease. Private to storage/.
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "storage/claims.hpp"

namespace surge::storage {

// One unfinished row as the backend read it.
struct unfinished_row {
  claimed_row row;
  bool due = false;   // next attempt due now
  bool free = false;  // leased by nobody
};

// A page is read with payloads up to this size (or the claim's cap, if smaller); a larger one is
// read alone when its key or its row is wanted. A window of rows is mostly passed over, and 256
// payloads of a megabyte would otherwise be held at once.
inline constexpr std::int64_t ordered_page_payload_bytes = 64 * 1024;

struct ordered_reader {
  // The claim's payload cap: a row over it is handed out without its payload, as any claim does.
  std::int64_t payload_cap = 0;
  // Appends up to `limit` unfinished rows with ids above `after`, in id order, payloads over
  // min(payload_cap, ordered_page_payload_bytes) read as '' (with their size).
  std::function<void(std::int64_t after, std::int64_t limit, std::vector<unfinished_row>&)> page;
  // The whole payload of one row.
  std::function<std::string(std::int64_t id)> payload_of;
};

// How many unfinished rows one claim reads at most, for `rows` asked: keys held back by a row in
// flight, waiting for a retry or stopped are passed over, a bounded number of them. When the
// held keys' rows fill the whole window, the subscriber's other keys wait with them.
std::int64_t ordered_read_limit(int rows);
inline constexpr std::int64_t ordered_read_page = 256;

struct ordered_pick {
  std::vector<claimed_row> rows;  // to lease, in id order, order_key set
  // Fewer than asked while due rows wait only for their key's row in flight.
  bool more_due = false;
  // The last id of the run of stopped keys' rows the read began with (the id read after, if the
  // first row read was of a key that goes on).
  std::int64_t stopped_through = 0;
};

// The rows `entry` (an ordered subscriber's demand) may lease now, reading the rows with ids above
// `read_after`.
ordered_pick pick_key_heads(const subscriber_demand& entry,
                            const std::set<std::string, std::less<>>& stopped_keys,
                            const ordered_reader& read, std::int64_t read_after = 0);

// Where each ordered subscriber's claim starts reading. A stopped key's rows stay unfinished until
// an operator resumes it, and thousands of them at the head of the queue would fill every claim's
// window, so that the subscriber's healthy keys behind them waited for ever. A claim remembers how
// far the run of stopped rows at the head reaches, and the next claim reads past it while the
// stopped keys are the same. Every `recheck` seconds the run is read from the start again: a row
// below its end that was not there when it was read (a replayed row, a PostgreSQL transaction that
// committed after a later id) waits at most that long.
class stopped_runs {
 public:
  static constexpr double recheck = 10;

  std::int64_t read_after(std::int64_t subscriber_id,
                          const std::set<std::string, std::less<>>& stopped_keys, double now) const;
  // What the claim that read after `read_after` found.
  void remember(std::int64_t subscriber_id, const std::set<std::string, std::less<>>& stopped_keys,
                std::int64_t read_after, std::int64_t through, double now);

 private:
  struct run {
    std::set<std::string, std::less<>> keys;  // the stopped keys when it was read
    std::int64_t through = 0;
    double read_from_start_at = 0;
  };
  std::unordered_map<std::int64_t, run> runs_;
};

}  // namespace surge::storage
