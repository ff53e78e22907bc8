#pragma once
// The quota each subscriber's partner last announced (RateLimit / X-RateLimit-* headers) and the
// pace the drain drew from it, one row per subscriber in `surge_partner_quota`: written by a
// drain's storage thread, read by `surge stats` in another process. Surge's own table: the
// steady-state drainer never reads it.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "storage/connection.hpp"

namespace surge::storage {

struct partner_quota_row {
  std::int64_t subscriber_id = 0;
  // Which header form said it: "ratelimit" (a RateLimit item), "ratelimit-policy" (a policy
  // alone) or "x-ratelimit".
  std::string form;
  std::optional<std::int64_t> quota;     // q, or X-RateLimit-Limit, when announced
  std::optional<double> window_seconds;  // the policy's w, when announced
  std::int64_t remaining = 0;            // units left until the reset
  double reset_at = 0;                   // Unix seconds
  double seen_at = 0;                    // when the response said so
  // The pace the drain set from it: the configured limit when it fits, lower until paced_until.
  double paced_rate = 0;
  double paced_burst = 0;
  double paced_until = 0;  // Unix seconds; 0 when the configured limit applies
};

// On either kind of queue (storage/connection.hpp), as storage/sqlite/partner_quotas.hpp describes
// them on a SQLite file; throw storage::error.
void record_partner_quotas(connection& db, std::span<const partner_quota_row> rows);
std::vector<partner_quota_row> load_partner_quotas(connection& db);

}  // namespace surge::storage
