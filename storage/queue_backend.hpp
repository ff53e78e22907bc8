#pragma once
// One queue on one database, behind the interfaces the neutral functions that take a
// storage::connection forward to (storage/queue.hpp, subscribers.hpp, ...): a SQLite file in the
// statements of its shape (storage/sqlite/queue_backend.cpp, the shape from
// storage/sqlite/queue_shape.hpp, as the drain's store has it), or a PostgreSQL server
// (storage/postgres/queue_backend.cpp). Every call throws storage::error. Private to storage/.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "proto/id_set.hpp"
#include "storage/audit.hpp"
#include "storage/backlog.hpp"
#include "storage/coalescing.hpp"
#include "storage/connection.hpp"
#include "storage/dead_letters.hpp"
#include "storage/drain_store.hpp"
#include "storage/maintenance.hpp"
#include "storage/ordered_keys.hpp"
#include "storage/ownership.hpp"
#include "storage/partner_quotas.hpp"
#include "storage/queue.hpp"
#include "storage/queue_shape.hpp"
#include "storage/retention.hpp"
#include "storage/subscribers.hpp"

namespace surge::storage {

// What is the same whatever the queue's shape, and callable before it is known.
class queue_database {
 public:
  virtual ~queue_database() = default;

  virtual bool is_postgres() const = 0;
  virtual std::vector<found_table> list_tables() = 0;
  virtual std::vector<std::pair<std::string, std::string>> list_indexes_and_triggers() = 0;
  virtual int schema_version() = 0;
  // A new queue: seed000's tables where missing, then Surge's additions.
  virtual int create_queue() = 0;
  virtual void set_subscriber_credentials(const subscriber_row& row) = 0;
  virtual std::vector<stopped_key> list_stopped_keys(const proto::id_set& which) = 0;
  virtual int resume_stopped_keys(std::int64_t subscriber_id,
                                  const std::optional<std::string>& key) = 0;
  virtual void record_partner_quotas(std::span<const partner_quota_row> rows) = 0;
  virtual std::vector<partner_quota_row> load_partner_quotas() = 0;
  virtual std::vector<drainer_ownership> read_ownership(double now) = 0;
  virtual std::int64_t enable_incremental_vacuum() = 0;
};

// The rest, in the statements of the queue's shape.
class queue_backend : public queue_database {
 public:
  // The shape the queue was found to be (storage::connection::shape()).
  virtual void use_shape(queue_shape shape) = 0;

  // Surge's additions to a queue of a known shape.
  virtual int migrate() = 0;
  virtual std::int64_t emit_event(std::string_view event_type, std::string_view payload, double now,
                                  int count) = 0;
  virtual queue_stats read_stats(double now, const proto::id_set& which) = 0;
  virtual std::int64_t count_outstanding(double now, const proto::id_set& which) = 0;
  virtual std::vector<subscriber_row> load_subscribers(const proto::id_set& which) = 0;
  virtual std::optional<subscriber_row> load_subscriber(std::int64_t id) = 0;
  // The row, its credentials and its order rule in one transaction, as
  // storage/subscribers.hpp says.
  virtual std::int64_t add_subscriber(const subscriber_row& row, credentials_write credentials,
                                      order_write order) = 0;
  virtual bool update_subscriber(const subscriber_row& row, credentials_write credentials,
                                 order_write order) = 0;
  virtual bool set_subscriber_active(std::int64_t id, bool active) = 0;
  virtual void set_subscriber_order(std::int64_t subscriber_id,
                                    const std::optional<proto::order_rule>& rule) = 0;
  virtual std::vector<lease_holder> other_live_owners(double now, const proto::id_set& which,
                                                      const std::string& self) = 0;
  virtual std::vector<dead_row> list_dead(const dead_selection& which) = 0;
  virtual replay_report replay_dead(const dead_selection& which, double now) = 0;
  virtual std::optional<delivery_detail> find_delivery(std::int64_t id) = 0;
  virtual std::vector<audit_entry> read_audit(const proto::id_set& which, bool with_delivered) = 0;
  virtual std::vector<subscriber_backlog> backlog_by_subscriber(double overdue_before,
                                                                const proto::id_set& which) = 0;
  virtual unheld_backlog read_unheld_due_rows(std::int64_t subscriber_id, double now, int limit,
                                              std::int64_t max_payload_bytes,
                                              std::int64_t max_total_bytes) = 0;
  virtual int mark_coalesced(std::span<const replacement> rows, double now) = 0;
  virtual prune_result prune(const prune_options& options,
                             const std::function<void(const prune_result&)>& progress) = 0;
};

// Each backend's openers, for a tool's connection and for a drain's store (its drain_store.cpp);
// storage/connection.cpp picks the backend the location names.
namespace sqlite {
std::unique_ptr<queue_backend> open_queue_backend(const connection_config& config);
std::unique_ptr<drain_store> open_drain_store(const drain_store_config& config);
}  // namespace sqlite
namespace pg {
std::unique_ptr<queue_backend> open_queue_backend(const connection_config& config);
std::unique_ptr<drain_store> open_drain_store(const drain_store_config& config);
}  // namespace pg

// For what a backend or shape does not have: storage::error of kind unsupported.
[[noreturn]] void not_on_postgres(std::string_view what);
[[noreturn]] void not_on_seed001(std::string_view what);

}  // namespace surge::storage
