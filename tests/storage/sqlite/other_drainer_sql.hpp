#pragma once
// The steady-state PHP drainer's statements, written as it writes them: base columns only.
// Shared by the compatibility test and surge_other_drainer so both exercise
// exactly what the old program runs against a file Surge has migrated.
#include <string>
#include <string_view>

namespace surge::other_drainer_sql {

// Parameters: lease (now + 30), now, now, limit.
inline constexpr std::string_view claim_head =
    "UPDATE webhook_delivery SET locked_until = ? WHERE id IN (SELECT id FROM webhook_delivery "
    "WHERE status IN ('pending','retry') AND next_attempt_at <= ? AND locked_until <= ?";
inline constexpr std::string_view claim_tail = " ORDER BY next_attempt_at LIMIT ?)";

// `subscriber_list` is a validated comma-separated list of integers, or empty for all.
inline std::string claim(std::string_view subscriber_list = {}) {
  std::string sql(claim_head);
  if (!subscriber_list.empty()) {
    sql += " AND subscriber_id IN (";
    sql += subscriber_list;
    sql += ")";
  }
  sql += claim_tail;
  return sql;
}

// Parameter: the lease just written.
inline constexpr const char* read_back =
    "SELECT id, subscriber_id, event_type, payload, attempts FROM webhook_delivery "
    "WHERE locked_until = ?";

// Parameter: subscriber id.
inline constexpr const char* read_bucket =
    "SELECT tokens, tokens_updated_at, rate_per_sec, burst FROM webhook_subscriber WHERE id = ?";
// Parameters: tokens, tokens_updated_at, subscriber id.
inline constexpr const char* write_bucket =
    "UPDATE webhook_subscriber SET tokens = ?, tokens_updated_at = ? WHERE id = ?";

// Parameter: delivery id.
inline constexpr const char* mark_done =
    "UPDATE webhook_delivery SET status='done', attempts=attempts+1, locked_until=0 WHERE id=?";
// Parameters: next_attempt_at, delivery id.
inline constexpr const char* mark_retry =
    "UPDATE webhook_delivery SET status='retry', attempts=attempts+1, next_attempt_at=?, "
    "locked_until=0 WHERE id=?";
// Parameter: delivery id.
inline constexpr const char* mark_dead =
    "UPDATE webhook_delivery SET status='dead', attempts=attempts+1, locked_until=0 WHERE id=?";

// The producer side as it predates Surge: no Surge column named.
// Parameters: url, secret, event_types, rate_per_sec, burst.
inline constexpr const char* insert_subscriber =
    "INSERT INTO webhook_subscriber (url, secret, event_types, rate_per_sec, burst) "
    "VALUES (?, ?, ?, ?, ?)";
// Parameters: subscriber_id, event_type, payload, next_attempt_at, created_at.
inline constexpr const char* insert_delivery =
    "INSERT INTO webhook_delivery (subscriber_id, event_type, payload, next_attempt_at, "
    "created_at) VALUES (?, ?, ?, ?, ?)";

}  // namespace surge::other_drainer_sql
