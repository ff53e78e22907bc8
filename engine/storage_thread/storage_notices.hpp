#pragma once
// What the storage thread tells an operator about what the database did with its writes and
// claims: each line says what happened, what becomes of the rows, and what to do if anything.
// Only words: when a line is said (once, at most every so often) is storage_reporter's rule.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "storage/maintenance.hpp"
#include "storage/ordered_keys.hpp"
#include "storage/outcomes.hpp"

namespace surge::engine::notice {

std::string key_stopped(const storage::stopped_key& stopped);
// Rows deleted from the queue while in flight, if the report names any.
std::optional<std::string> deleted_in_flight(const storage::write_report& report);
// Leases another drainer took (lost leases that are not deleted rows), if any.
std::optional<std::string> leases_taken(const storage::write_report& report);
// Rows whose outcomes wait because another session holds them locked; `held` is not empty.
std::string rows_held(const std::vector<std::int64_t>& held);
// Subscriber rows another session holds locked; `held` is not empty.
std::string subscribers_held(const std::vector<std::int64_t>& held);
std::string bucket_repaired(std::int64_t subscriber, const std::string& repaired);
std::string dead_lettered(std::int64_t delivery_id, const std::string& reason);
std::string quarantined(std::int64_t delivery_id, const std::string& reason);
// Subscribers another drainer took over; `lost` is not empty.
std::string ownership_lost(const std::vector<std::int64_t>& lost);
std::string orphans_dead_lettered(std::int64_t orphans);
std::string malformed_dead_lettered(const storage::malformed_rows& found);

}  // namespace surge::engine::notice
