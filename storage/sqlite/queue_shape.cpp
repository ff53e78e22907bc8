// seed000's shape on SQLite (storage/sqlite/queue_shape.hpp), and which shape a file holds.
#include "storage/sqlite/queue_shape.hpp"

#include "storage/sqlite/queue.hpp"
#include "storage/sqlite/schema.hpp"
#include "storage/sqlite/subscribers.hpp"

namespace surge::storage::sqlite {

const sqlite_queue_shape& seed000_sqlite_shape() {
  static const sqlite_queue_shape shape{
      .claims = seed000_claim_statements(),
      .buckets = seed000_bucket_statements(),
      .new_rows = seed000_change_statements(),
      .deliveries = seed000_deliveries(),
      .make_writer = [](SQLite::Database& db) -> std::unique_ptr<outcome_applier> {
        return std::make_unique<outcome_writer>(db);
      },
      .ordered_claims = seed000_ordered_index(),
      .migrate = &migrate,
      .emit_event = &emit_event,
      .read_stats = &read_stats,
      .load_subscriber = &load_subscriber,
      .add_subscriber = &add_subscriber,
      .update_subscriber = &update_subscriber,
      .set_subscriber_active = &set_subscriber_active,
      .coalesces = true,
  };
  return shape;
}

queue_shape shape_of_file(SQLite::Database& db, std::optional<queue_shape> named,
                          const std::string& location) {
  return usable_shape(classify_queue(list_tables(db), named, location));
}

}  // namespace surge::storage::sqlite
