#pragma once
// Reading the audit from a SQLite queue's surge_attempt table.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include <SQLiteCpp/Database.h>

#include "proto/id_set.hpp"
#include "storage/audit.hpp"
#include "storage/connection.hpp"
#include "storage/sqlite/delivery_table.hpp"

namespace surge::storage::sqlite {

// Audits every chosen subscriber that has attempts, ordered by id, with the limits now in
// webhook_subscriber. Reads the attempts sorted by subscriber (the database sorts; the attempt
// index follows the write order, for the drain's sake) and judges one subscriber at a time, so
// this process's memory follows the busiest subscriber, not the table. Empty before migration 1.
std::vector<audit_entry> read_audit(SQLite::Database& db, const proto::id_set& which = {},
                                    bool with_delivered = false,
                                    const delivery_table& table = seed000_deliveries());

}  // namespace surge::storage::sqlite
