#include "storage/sqlite/delivery_table.hpp"

#include "storage/sqlite/subscribers.hpp"

namespace surge::storage::sqlite {

const delivery_table& seed000_deliveries() {
  static const delivery_table table{
      .name = "webhook_delivery",
      .subscriber_table = "webhook_subscriber",
      .status = "status",
      .outstanding = "status IN ('pending', 'retry')",
      .pending = "status = 'pending'",
      .attempts = "attempts",
      .lease = "locked_until",
      .next_attempt = "next_attempt_at",
      .created = "created_at",
      .whole_seconds = false,
      // Its WHERE is the outstanding condition above, so the index covers what reads it.
      .due_index = "idx_delivery_subscriber_due",
      .free_at = [](std::string_view now) { return "locked_until <= " + std::string(now); },
      .dead = "status = 'dead'",
      .last_error = "last_error",
      .note = nullptr,
      .done = "status = 'done'",
      .done_or_dead = "status IN ('done', 'dead')",
      .finished_at = "COALESCE(delivered_at, created_at)",
      .notes = nullptr,
      .load_subscribers = [](SQLite::Database& db,
                             const proto::id_set& which) { return load_subscribers(db, which); },
  };
  return table;
}

}  // namespace surge::storage::sqlite
