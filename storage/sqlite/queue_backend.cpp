// A queue in a SQLite file, for storage::connection (storage/queue_backend.hpp): each call runs
// the statements of the file's shape (storage/sqlite/queue_shape.hpp) and turns SQLite's errors
// into storage::error.
#include "storage/queue_backend.hpp"

#include <SQLiteCpp/Exception.h>

#include "storage/sqlite/audit.hpp"
#include "storage/sqlite/backlog.hpp"
#include "storage/sqlite/coalescing.hpp"
#include "storage/sqlite/database.hpp"
#include "storage/sqlite/dead_letters.hpp"
#include "storage/sqlite/maintenance.hpp"
#include "storage/sqlite/ordered_keys.hpp"
#include "storage/sqlite/ownership.hpp"
#include "storage/sqlite/partner_quotas.hpp"
#include "storage/sqlite/queue.hpp"
#include "storage/sqlite/queue_shape.hpp"
#include "storage/sqlite/retention.hpp"
#include "storage/sqlite/schema.hpp"
#include "storage/sqlite/sql_support.hpp"
#include "storage/sqlite/subscribers.hpp"

namespace surge::storage::sqlite {
namespace {

class sqlite_queue_backend final : public queue_backend {
  // Defined first: its return type is deduced, so it must be seen before its callers.
  template <class Work>
  decltype(auto) translated(Work&& work) {
    try {
      return work();
    } catch (const SQLite::Exception& failure) {
      throw from_sqlite(failure);
    }
  }

 public:
  explicit sqlite_queue_backend(SQLite::Database db) : db_(std::move(db)) {}

  bool is_postgres() const override { return false; }

  std::vector<found_table> list_tables() override {
    return translated([&] { return sqlite::list_tables(db_); });
  }
  std::vector<std::pair<std::string, std::string>> list_indexes_and_triggers() override {
    return translated([&] { return sqlite::list_indexes_and_triggers(db_); });
  }
  int schema_version() override {
    return translated([&] { return sqlite::schema_version(db_); });
  }
  int create_queue() override {
    return translated([&] { return seed000_sqlite_shape().migrate(db_); });
  }
  // The tables below are Surge's own, the same in either shape.
  void set_subscriber_credentials(const subscriber_row& row) override {
    translated([&] { sqlite::set_subscriber_credentials(db_, row); });
  }
  std::vector<stopped_key> list_stopped_keys(const proto::id_set& which) override {
    return translated([&] { return sqlite::list_stopped_keys(db_, which); });
  }
  int resume_stopped_keys(std::int64_t subscriber_id,
                          const std::optional<std::string>& key) override {
    return translated([&] { return sqlite::resume_stopped_keys(db_, subscriber_id, key); });
  }
  void record_partner_quotas(std::span<const partner_quota_row> rows) override {
    translated([&] { sqlite::record_partner_quotas(db_, rows); });
  }
  std::vector<partner_quota_row> load_partner_quotas() override {
    return translated([&] { return sqlite::load_partner_quotas(db_); });
  }
  std::vector<drainer_ownership> read_ownership(double now) override {
    return translated([&] { return sqlite::read_ownership(db_, now); });
  }
  std::int64_t enable_incremental_vacuum() override {
    return translated([&] { return sqlite::enable_incremental_vacuum(db_); });
  }

  void use_shape(queue_shape shape) override { shape_ = &sqlite_shape_of(shape); }

  int migrate() override {
    return translated([&] { return shape().migrate(db_); });
  }
  std::int64_t emit_event(std::string_view event_type, std::string_view payload, double now,
                          int count) override {
    return translated([&] { return shape().emit_event(db_, event_type, payload, now, count); });
  }
  queue_stats read_stats(double now, const proto::id_set& which) override {
    return translated([&] { return shape().read_stats(db_, now, which); });
  }
  std::int64_t count_outstanding(double now, const proto::id_set& which) override {
    return translated(
        [&] { return sqlite::count_outstanding(db_, now, which, shape().deliveries); });
  }
  std::vector<subscriber_row> load_subscribers(const proto::id_set& which) override {
    return translated([&] { return shape().deliveries.load_subscribers(db_, which); });
  }
  std::optional<subscriber_row> load_subscriber(std::int64_t id) override {
    return translated([&] { return shape().load_subscriber(db_, id); });
  }
  std::int64_t add_subscriber(const subscriber_row& row, credentials_write credentials,
                              order_write order) override {
    return translated([&] {
      // The shape's insert, the credentials and the order rule join one write transaction (each
      // function opens its own only when none is open).
      write_transaction step(db_);
      auto added = row;
      added.id = shape().add_subscriber(db_, row);
      write_beside(added, credentials, order);
      step.commit();
      return added.id;
    });
  }
  bool update_subscriber(const subscriber_row& row, credentials_write credentials,
                         order_write order) override {
    return translated([&] {
      write_transaction step(db_);
      const bool found = shape().update_subscriber(db_, row);
      if (found) write_beside(row, credentials, order);
      step.commit();
      return found;
    });
  }
  bool set_subscriber_active(std::int64_t id, bool active) override {
    return translated([&] { return shape().set_subscriber_active(db_, id, active); });
  }
  void set_subscriber_order(std::int64_t subscriber_id,
                            const std::optional<proto::order_rule>& rule) override {
    translated(
        [&] { sqlite::set_subscriber_order(db_, subscriber_id, rule, shape().ordered_claims); });
  }
  std::vector<lease_holder> other_live_owners(double now, const proto::id_set& which,
                                              const std::string& self) override {
    return translated(
        [&] { return sqlite::other_live_owners(db_, now, which, self, shape().deliveries); });
  }
  std::vector<dead_row> list_dead(const dead_selection& which) override {
    return translated([&] { return sqlite::list_dead(db_, which, shape().deliveries); });
  }
  replay_report replay_dead(const dead_selection& which, double now) override {
    return translated([&] { return sqlite::replay_dead(db_, which, now, shape().deliveries); });
  }
  std::optional<delivery_detail> find_delivery(std::int64_t id) override {
    return translated([&] { return sqlite::find_delivery(db_, id, shape().deliveries); });
  }
  std::vector<audit_entry> read_audit(const proto::id_set& which, bool with_delivered) override {
    return translated(
        [&] { return sqlite::read_audit(db_, which, with_delivered, shape().deliveries); });
  }
  std::vector<subscriber_backlog> backlog_by_subscriber(double overdue_before,
                                                        const proto::id_set& which) override {
    return translated([&] {
      return sqlite::backlog_by_subscriber(db_, overdue_before, which, shape().deliveries);
    });
  }
  unheld_backlog read_unheld_due_rows(std::int64_t subscriber_id, double now, int limit,
                                      std::int64_t max_payload_bytes,
                                      std::int64_t max_total_bytes) override {
    if (!shape().coalesces) not_on_seed001("coalescing");
    return translated([&] {
      return sqlite::read_unheld_due_rows(db_, subscriber_id, now, limit, max_payload_bytes,
                                          max_total_bytes);
    });
  }
  int mark_coalesced(std::span<const replacement> rows, double now) override {
    if (!shape().coalesces) not_on_seed001("coalescing");
    return translated([&] { return sqlite::mark_coalesced(db_, rows, now); });
  }
  prune_result prune(const prune_options& options,
                     const std::function<void(const prune_result&)>& progress) override {
    return translated([&] { return sqlite::prune(db_, options, progress, shape().deliveries); });
  }

 private:
  const sqlite_queue_shape& shape() const {
    if (shape_ == nullptr) {
      throw error("the queue's shape was used before it was read", error::kind::other);
    }
    return *shape_;
  }
  // What an added or changed subscriber row carries in Surge's tables beside the shape's.
  void write_beside(const subscriber_row& row, credentials_write credentials, order_write order) {
    if (credentials == credentials_write::replace) sqlite::set_subscriber_credentials(db_, row);
    if (order == order_write::replace) {
      sqlite::set_subscriber_order(db_, row.id, row.order, shape().ordered_claims);
    }
  }

  SQLite::Database db_;
  const sqlite_queue_shape* shape_ = nullptr;  // once use_shape() named it
};

}  // namespace

std::unique_ptr<queue_backend> open_queue_backend(const connection_config& config) {
  try {
    return std::make_unique<sqlite_queue_backend>(
        open_database({.path = config.location,
                       .busy_timeout = config.busy_timeout,
                       .create_if_missing = config.create_if_missing,
                       .read_only = config.read_only,
                       .cache_kib = config.cache_kib,
                       .lock_wait = config.lock_wait}));
  } catch (const SQLite::Exception& failure) {
    throw from_sqlite(failure);
  }
}

}  // namespace surge::storage::sqlite
