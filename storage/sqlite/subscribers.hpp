#pragma once
// Subscribers on a SQLite queue.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <SQLiteCpp/Database.h>

#include "proto/extra_headers.hpp"
#include "proto/id_set.hpp"
#include "storage/connection.hpp"
#include "storage/subscribers.hpp"

namespace surge::storage::sqlite {

// Every column of the chosen subscribers (active or not), ordered by id.
std::vector<subscriber_row> load_subscribers(SQLite::Database& db, const proto::id_set& which = {});
std::optional<subscriber_row> load_subscriber(SQLite::Database& db, std::int64_t id);

// Inserts a subscriber (the id is chosen by SQLite when row.id is 0) and returns its id.
std::int64_t add_subscriber(SQLite::Database& db, const subscriber_row& row);
// Writes every column but tokens/tokens_updated_at. False when no such subscriber.
bool update_subscriber(SQLite::Database& db, const subscriber_row& row);
bool set_subscriber_active(SQLite::Database& db, std::int64_t id, bool active);
// Replaces the row's extra_headers and client certificate files (none at all removes its
// credentials row); the subscriber tables are not touched. Either SQLite shape.
void set_subscriber_credentials(SQLite::Database& db, const subscriber_row& row);

}  // namespace surge::storage::sqlite
