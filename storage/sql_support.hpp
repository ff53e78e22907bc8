#pragma once
// SQL text shared by the SQLite and PostgreSQL sources; not part of the storage API.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "proto/id_set.hpp"

namespace surge::storage::detail {

// A row's attempts as the drain counts from it: within 0 and one below the narrowest column
// that holds it (PostgreSQL's integer), so the count written after an attempt always fits,
// whatever another program stored. A negative count is a row never attempted.
inline std::int64_t attempts_in_range(std::int64_t stored) {
  return std::clamp<std::int64_t>(stored, 0, std::numeric_limits<std::int32_t>::max() - 1);
}

// "?3, ?4, ..., ?(first + count - 1)": numbered parameters for a statement of several ids.
inline std::string numbered_placeholders(int first, int count) {
  std::string text;
  for (int i = 0; i < count; ++i) text += (i ? ", ?" : "?") + std::to_string(first + i);
  return text;
}

// A boolean SQL expression selecting `column` values in `which` ("1" when all): integer literals
// only, so it is safe to splice into statement text; valid SQL for SQLite and PostgreSQL alike.
std::string id_filter(const proto::id_set& which, std::string_view column);

// Surge's per-subscriber credentials (surge_subscriber_credential), read beside either shape's
// subscriber rows: the four columns to select (the proxy column only once schema 10 added it;
// `subscriber list` may read a queue not migrated that far), and the join naming the subscriber
// id column.
inline std::string credential_columns(bool with_proxy) {
  return std::string(
             ", COALESCE(c.headers, ''), COALESCE(c.client_cert, ''), "
             "COALESCE(c.client_key, ''), ") +
         (with_proxy ? "COALESCE(c.proxy, '')" : "''");
}
inline std::string credential_join(std::string_view subscriber_id) {
  return " LEFT JOIN surge_subscriber_credential c ON c.subscriber_id = " +
         std::string(subscriber_id) + " ";
}

}  // namespace surge::storage::detail
