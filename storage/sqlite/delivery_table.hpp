#pragma once
// A queue shape's delivery table on SQLite, by what its columns and states are called: what lets
// one statement serve seed000's webhook_delivery and seed001's webhook_deliveries. The
// statements that differ in more than names stay with their shape (storage/seed001/). Private to
// storage/.
#include <string>
#include <string_view>
#include <vector>

#include <SQLiteCpp/Database.h>

#include "proto/id_set.hpp"
#include "storage/subscribers.hpp"

namespace surge::storage::sqlite {

struct delivery_table {
  const char* name;              // the delivery table
  const char* subscriber_table;  // whose ids its rows, and ownership leases, name
  const char* status;            // column: the row's state, as the shape names its values
  const char* outstanding;       // condition: queued or retrying, held or not
  const char* pending;           // assignment: queued again, never tried
  const char* attempts;          // column: attempts made
  const char* lease;             // column: until when a row is held (Unix seconds)
  const char* next_attempt;      // column: when a row is due
  const char* created;           // column: when a row was queued
  bool whole_seconds;            // its times are whole Unix seconds
  const char* due_index;         // the index of outstanding rows by subscriber, then due time
  // Condition: nobody holds the row at the Unix time in parameter `now` ("?1").
  std::string (*free_at)(std::string_view now);
  // Assignment (and condition): dead.
  const char* dead;
  // Column: why a row failed or died; nullptr when the shape has none, and the reason goes to
  // `note` instead: ?1 delivery id, ?2 last status (NULL: no response), ?3 reason, ?4 when.
  const char* last_error;
  const char* note;
  const char* done;          // condition: delivered
  const char* done_or_dead;  // condition: delivered or dead
  const char* finished_at;   // expression: when a finished row finished, Unix seconds
  // A table of Surge's keyed by delivery_id whose rows go with their delivery (or nullptr).
  const char* notes;
  std::vector<subscriber_row> (*load_subscribers)(SQLite::Database& db, const proto::id_set& which);
};

// seed000's (storage/sqlite/delivery_table.cpp) and seed001's (storage/seed001/queue.cpp).
const delivery_table& seed000_deliveries();
const delivery_table& seed001_deliveries();

}  // namespace surge::storage::sqlite
