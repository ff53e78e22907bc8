#pragma once
// Partner quotas on a SQLite queue.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <SQLiteCpp/Database.h>

#include "storage/connection.hpp"
#include "storage/partner_quotas.hpp"

namespace surge::storage::sqlite {

// Replaces each subscriber's row with the one given, in one BEGIN IMMEDIATE transaction.
void record_partner_quotas(SQLite::Database& db, std::span<const partner_quota_row> rows);
// Every row, by subscriber id; none on a file not migrated that far.
std::vector<partner_quota_row> load_partner_quotas(SQLite::Database& db);

}  // namespace surge::storage::sqlite
