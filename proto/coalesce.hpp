#pragma once
// Coalescing: among due rows of one subscriber that share a key taken from the
// payload, only the newest within a window is sent; the others end done, naming it. Pure, so the
// rule is tested without a queue.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace surge::proto {

inline constexpr double max_coalesce_window_seconds = 3600;

struct coalesce_rule {
  std::string pointer;            // RFC 6901 JSON pointer into the payload, e.g. "/data/video_id"
  double window_seconds = 10;     // rows further apart than this are never merged
  std::string event_types = "*";  // which rows the rule applies to (event_match syntax)
};

// Why `pointer` cannot be used ("must start with '/'", a bad "~" escape); empty when it can.
// The empty pointer is refused too: it would make the whole payload the key.
std::string coalesce_pointer_problem(std::string_view pointer);

// The key a row is merged on: its event type and the JSON text of the value at the pointer, so
// rows of different types never merge. nullopt when the rule does not apply to the row (type
// outside the rule, payload not JSON, pointer not found): such a row is sent as usual.
std::optional<std::string> coalesce_key(const coalesce_rule& rule, std::string_view event_type,
                                        std::string_view payload);

struct coalesce_candidate {
  std::int64_t id = 0;
  double created_at = 0;
  std::optional<std::string> key;
  // The created_at of the oldest row this one already stands for (rows merged into it before,
  // and theirs in turn); nullopt: only itself.
  std::optional<double> stands_since;
};

// For each candidate (in any order), the id of the candidate sent in its place, or 0 when it is
// to be sent itself. Per key, the newest row (latest created_at, then highest id) is kept, and
// every older row is replaced by it when the oldest row it stands for was created within
// `window_seconds` of the keeper: the window counts along the whole chain of merges, so a row
// merged into one that is merged later still reaches the partner within one window of its
// creation. The first row that does not fit is kept in turn and starts the next window, so a
// receiver hears at least once per window of a key's history. Rows without a key are all kept.
std::vector<std::int64_t> plan_coalescing(std::span<const coalesce_candidate> candidates,
                                          double window_seconds);

// The created_at of the oldest row `keeper` stands for once `merged` is merged into it.
double stands_since_after_merge(const coalesce_candidate& keeper, const coalesce_candidate& merged);
}  // namespace surge::proto
