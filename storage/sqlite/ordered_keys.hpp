#pragma once
// Ordered delivery's tables on a SQLite file, either shape (storage/ordered_keys.hpp).
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <SQLiteCpp/Database.h>

#include "proto/id_set.hpp"
#include "proto/ordered_delivery.hpp"
#include "storage/ordered_keys.hpp"
#include "storage/subscribers.hpp"

namespace surge::storage::sqlite {

// The index the ordered claim reads, on the shape's delivery table: its unfinished rows by
// subscriber, in rowid (enqueue) order.
struct ordered_index {
  const char* create;
  const char* drop;
};
const ordered_index& seed000_ordered_index();

void set_subscriber_order(SQLite::Database& db, std::int64_t subscriber_id,
                          const std::optional<proto::order_rule>& rule, const ordered_index& index);
// Fills each row's `order` from surge_subscriber_order (a file not migrated that far: none).
void read_subscriber_orders(SQLite::Database& db, std::span<subscriber_row> rows);
std::vector<stopped_key> list_stopped_keys(SQLite::Database& db, const proto::id_set& which);
int resume_stopped_keys(SQLite::Database& db, std::int64_t subscriber_id,
                        const std::optional<std::string>& key);
// After a replay put these rows back in the queue: the keys they stopped go on, the replayed row
// first.
void resume_keys_stopped_by(SQLite::Database& db, std::span<const std::int64_t> delivery_ids);

// The two tables, and the trigger that deletes a subscriber's rows of them with it, for the
// shape whose subscriber table is `subscriber_table` (seed000's migration 9, seed001's schema).
std::string ordered_tables_ddl(std::string_view subscriber_table);

// What the claim and the outcome writer run on surge_stopped_key.
constexpr const char* stopped_keys_of_sql =
    "SELECT order_key FROM surge_stopped_key WHERE subscriber_id = ?";
constexpr const char* stop_key_sql =
    "INSERT OR IGNORE INTO surge_stopped_key(subscriber_id, order_key, delivery_id, stopped_at) "
    "VALUES (?, ?, ?, ?)";

}  // namespace surge::storage::sqlite
