#pragma once
// Ordered delivery per key (opt-in per subscriber): within a key taken from the payload, rows go
// out in enqueue order with at most one in flight. The rule is stated over a subscriber's
// unfinished rows in enqueue order, so it holds whoever leased or rescheduled them and survives a
// restart: a row may be claimed only while no earlier unfinished row shares its key. Pure, so the
// rule is tested without a queue.
#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <string_view>

namespace surge::proto {

// What happens to a key when one of its rows dies (attempts or age).
enum class dead_key { moves_on, stops };

struct order_rule {
  // RFC 6901 JSON pointer to the key in the payload, e.g. "/video_id"; "" orders the whole
  // subscriber as one key.
  std::string pointer;
  dead_key when_dead = dead_key::moves_on;
};

// Why `pointer` cannot name an order key; empty when it can ("" can: the whole subscriber).
std::string order_pointer_problem(std::string_view pointer);

// The key a row is ordered under: the JSON text of the value at the pointer, so 7 and "7" are
// different keys; a text longer than max_order_key_bytes is named by its SHA-256 instead
// ("sha256:<hex>"). Rows whose payload is not JSON or lacks the value share the key "" (which no
// JSON text is): they are ordered among themselves.
inline constexpr std::size_t max_order_key_bytes = 128;
std::string order_key(std::string_view pointer, std::string_view payload);

// The rule, applied to a subscriber's unfinished rows read in enqueue order: a row may be claimed
// only if it is the first unfinished row of its key, due and free, its key is not stopped, and no
// row of its key is leased. A key whose first row is in flight, waits for a retry or is not due
// yet holds its later rows back; the other keys go on. "No row leased" covers a row that became
// visible after a later row of its key was claimed (a PostgreSQL producer's transaction that
// committed late, a dead row replayed): it waits until that row is finished.
class key_heads {
 public:
  explicit key_heads(const std::set<std::string, std::less<>>& stopped_keys)
      : stopped_keys_(stopped_keys) {}
  // Reads the next row. `due`: its next attempt is due now; `free`: nobody holds it leased.
  // Whether it is a candidate: the first row of its key, due, free and its key not stopped.
  bool consider(const std::string& key, bool due, bool free);
  // After the rows read: whether the candidate of `key` may go (no row of its key leased).
  bool may_go(const std::string& key) const;
  // Whether a due, free row was held back behind a leased row of its key: once that row's
  // outcome is written the key goes on, so the subscriber has more to claim soon, not after an
  // idle poll.
  bool held_behind_flight() const { return held_behind_flight_; }

 private:
  struct key_seen {
    bool leased = false;  // some row of the key read so far is leased
  };
  const std::set<std::string, std::less<>>& stopped_keys_;
  std::map<std::string, key_seen, std::less<>> seen_;
  bool held_behind_flight_ = false;
};

// "skip" and "stop", as the CLI and Surge's table spell the rule; parse_dead_key returns false
// for any other text and leaves `rule` as it was.
std::string_view dead_key_name(dead_key rule);
bool parse_dead_key(std::string_view text, dead_key& rule);

}  // namespace surge::proto
