// A queue on a PostgreSQL server, for storage::connection (storage/queue_backend.hpp): one shape,
// seed000's, so each call is the server's statement (storage/postgres/queue.hpp).
#include "storage/queue_backend.hpp"

#include "storage/postgres/queue.hpp"

namespace surge::storage::pg {
namespace {

class postgres_queue_backend final : public queue_backend {
 public:
  explicit postgres_queue_backend(const connection_config& config)
      : db_(config.location, session_limits{.interrupt = config.lock_wait}) {}

  bool is_postgres() const override { return true; }

  std::vector<found_table> list_tables() override { return pg::list_tables(db_); }
  std::vector<std::pair<std::string, std::string>> list_indexes_and_triggers() override {
    return pg::list_indexes_and_triggers(db_);
  }
  int schema_version() override { return pg::schema_version(db_); }
  int create_queue() override { return pg::migrate(db_); }
  void set_subscriber_credentials(const subscriber_row& row) override {
    pg::set_subscriber_credentials(db_, row);
  }
  std::vector<stopped_key> list_stopped_keys(const proto::id_set& which) override {
    return pg::list_stopped_keys(db_, which);
  }
  int resume_stopped_keys(std::int64_t subscriber_id,
                          const std::optional<std::string>& key) override {
    return pg::resume_stopped_keys(db_, subscriber_id, key);
  }
  void record_partner_quotas(std::span<const partner_quota_row> rows) override {
    pg::record_partner_quotas(db_, rows);
  }
  std::vector<partner_quota_row> load_partner_quotas() override {
    return pg::load_partner_quotas(db_);
  }
  std::vector<drainer_ownership> read_ownership(double now) override {
    return pg::read_ownership(db_, now);
  }
  std::int64_t enable_incremental_vacuum() override {
    not_on_postgres("surge prune --enable-vacuum");
  }

  // storage::connection refuses seed001 on a server before it gets here.
  void use_shape(queue_shape) override {}

  int migrate() override { return pg::migrate(db_); }
  std::int64_t emit_event(std::string_view event_type, std::string_view payload, double now,
                          int count) override {
    return pg::emit_event(db_, event_type, payload, now, count);
  }
  queue_stats read_stats(double now, const proto::id_set& which) override {
    return pg::read_stats(db_, now, which);
  }
  std::int64_t count_outstanding(double now, const proto::id_set& which) override {
    return pg::count_outstanding(db_, now, which);
  }
  std::vector<subscriber_row> load_subscribers(const proto::id_set& which) override {
    return pg::load_subscribers(db_, which);
  }
  std::optional<subscriber_row> load_subscriber(std::int64_t id) override {
    return pg::load_subscriber(db_, id);
  }
  std::int64_t add_subscriber(const subscriber_row& row, credentials_write credentials,
                              order_write order) override {
    auto added = row;
    bool none_ordered = false;
    {
      // One transaction holds the row, its credentials and its order rule; the order index
      // follows it.
      transaction step(db_);
      added.id = pg::add_subscriber(db_, row);
      none_ordered = write_beside(added, credentials, order);
      step.commit();
    }
    if (order == order_write::replace) settle_order_index(db_, row.order.has_value(), none_ordered);
    return added.id;
  }
  bool update_subscriber(const subscriber_row& row, credentials_write credentials,
                         order_write order) override {
    bool found = false;
    bool none_ordered = false;
    {
      transaction step(db_);
      found = pg::update_subscriber(db_, row);
      if (found) none_ordered = write_beside(row, credentials, order);
      step.commit();
    }
    if (found && order == order_write::replace) {
      settle_order_index(db_, row.order.has_value(), none_ordered);
    }
    return found;
  }
  bool set_subscriber_active(std::int64_t id, bool active) override {
    return pg::set_subscriber_active(db_, id, active);
  }
  void set_subscriber_order(std::int64_t subscriber_id,
                            const std::optional<proto::order_rule>& rule) override {
    pg::set_subscriber_order(db_, subscriber_id, rule);
  }
  std::vector<lease_holder> other_live_owners(double now, const proto::id_set& which,
                                              const std::string& self) override {
    return pg::other_live_owners(db_, now, which, self);
  }
  std::vector<dead_row> list_dead(const dead_selection& which) override {
    return pg::list_dead(db_, which);
  }
  replay_report replay_dead(const dead_selection& which, double now) override {
    return pg::replay_dead(db_, which, now);
  }
  std::optional<delivery_detail> find_delivery(std::int64_t id) override {
    return pg::find_delivery(db_, id);
  }
  std::vector<audit_entry> read_audit(const proto::id_set& which, bool with_delivered) override {
    return pg::read_audit(db_, which, with_delivered);
  }
  std::vector<subscriber_backlog> backlog_by_subscriber(double overdue_before,
                                                        const proto::id_set& which) override {
    return pg::backlog_by_subscriber(db_, overdue_before, which);
  }
  unheld_backlog read_unheld_due_rows(std::int64_t subscriber_id, double now, int limit,
                                      std::int64_t max_payload_bytes,
                                      std::int64_t max_total_bytes) override {
    return pg::read_unheld_due_rows(db_, subscriber_id, now, limit, max_payload_bytes,
                                    max_total_bytes);
  }
  int mark_coalesced(std::span<const replacement> rows, double now) override {
    return pg::mark_coalesced(db_, rows, now);
  }
  prune_result prune(const prune_options&,
                     const std::function<void(const prune_result&)>&) override {
    not_on_postgres("surge prune");
  }

 private:
  // What an added or changed subscriber row carries beside it, in its transaction; whether no
  // subscriber is ordered any more (for the order index).
  bool write_beside(const subscriber_row& row, credentials_write credentials, order_write order) {
    if (credentials == credentials_write::replace) pg::set_subscriber_credentials(db_, row);
    if (order != order_write::replace) return false;
    return write_subscriber_order(db_, row.id, row.order);
  }

  session db_;
};

}  // namespace

std::unique_ptr<queue_backend> open_queue_backend(const connection_config& config) {
  return std::make_unique<postgres_queue_backend>(config);
}

}  // namespace surge::storage::pg
