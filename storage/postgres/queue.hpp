#pragma once
// The PostgreSQL side of the queue functions the tools use (storage/queue.hpp, subscribers.hpp,
// schema.hpp): the same contracts, reached through storage::connection. Private to storage/.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "proto/id_set.hpp"
#include "storage/audit.hpp"
#include "storage/backlog.hpp"
#include "storage/claims.hpp"
#include "storage/coalescing.hpp"
#include "storage/dead_letters.hpp"
#include "storage/maintenance.hpp"
#include "storage/ordered_claim.hpp"
#include "storage/ordered_keys.hpp"
#include "storage/ownership.hpp"
#include "storage/partner_quotas.hpp"
#include "storage/postgres/session.hpp"
#include "storage/queue.hpp"
#include "storage/queue_shape.hpp"
#include "storage/subscribers.hpp"

namespace surge::storage::pg {

int schema_version(session& db);
int latest_schema_version();
int migrate(session& db);
// Every table of the current schema with its columns (storage/queue_shape.hpp).
std::vector<found_table> list_tables(session& db);
// The schema's indexes (those behind a primary key or unique constraint left out) and triggers
// (PostgreSQL's internal ones left out), as (type, name).
std::vector<std::pair<std::string, std::string>> list_indexes_and_triggers(session& db);

std::int64_t emit_event(session& db, std::string_view event_type, std::string_view payload,
                        double now, int count);
queue_stats read_stats(session& db, double now, const proto::id_set& which);
std::int64_t count_outstanding(session& db, double now, const proto::id_set& which);
std::optional<double> earliest_scheduled(session& db, double now, const proto::id_set& which);

std::vector<subscriber_row> load_subscribers(session& db, const proto::id_set& which);
std::optional<subscriber_row> load_subscriber(session& db, std::int64_t id);
std::int64_t add_subscriber(session& db, const subscriber_row& row);
bool update_subscriber(session& db, const subscriber_row& row);
bool set_subscriber_active(session& db, std::int64_t id, bool active);
void set_subscriber_credentials(session& db, const subscriber_row& row);
// storage/ordered_keys.hpp on PostgreSQL (storage/postgres/ordered_keys.cpp).
void set_subscriber_order(session& db, std::int64_t subscriber_id,
                          const std::optional<proto::order_rule>& rule);
// Its two steps: the rows, inside the caller's transaction (whether no subscriber is ordered any
// more), and the index, outside any transaction.
bool write_subscriber_order(session& db, std::int64_t subscriber_id,
                            const std::optional<proto::order_rule>& rule);
void settle_order_index(session& db, bool ordered, bool none_ordered);
void read_subscriber_orders(session& db, std::span<subscriber_row> rows);
std::vector<stopped_key> list_stopped_keys(session& db, const proto::id_set& which);
int resume_stopped_keys(session& db, std::int64_t subscriber_id,
                        const std::optional<std::string>& key);
void resume_keys_stopped_by(session& db, std::span<const std::int64_t> delivery_ids);
// The drain's claim for an ordered subscriber (proto/ordered_delivery.hpp): reads its unfinished
// rows in id order and leases the first row of each key that is due and free, under `lease`.
// `more_due`: it gave fewer rows than asked while keys wait only for their rows in flight.
// `runs`: where each subscriber's read starts, past its stopped keys' rows (ordered_claim.hpp).
std::vector<claimed_row> claim_ordered(session& db, const subscriber_demand& entry, double now,
                                       double lease, std::int64_t max_payload_bytes,
                                       stopped_runs& runs, bool& more_due);
// The coalescing sweep's read and marks (storage/coalescing.hpp).
unheld_backlog read_unheld_due_rows(session& db, std::int64_t subscriber_id, double now, int limit,
                                    std::int64_t max_payload_bytes, std::int64_t max_total_bytes);
int mark_coalesced(session& db, std::span<const replacement> rows, double now);
// A claimed row from a result whose columns, from `first` on, are the claim's: id,
// subscriber_id, event_type, payload, attempts, next_attempt_at, created_at, payload size,
// coalesced_since.
void read_claimed_row(const result& found, int row, int first, claimed_row& out);

std::vector<drainer_ownership> read_ownership(session& db, double now);
std::vector<dead_row> list_dead(session& db, const dead_selection& which);
replay_report replay_dead(session& db, const dead_selection& which, double now);
std::optional<delivery_detail> find_delivery(session& db, std::int64_t id);
std::vector<audit_entry> read_audit(session& db, const proto::id_set& which, bool with_delivered);

std::vector<subscriber_backlog> backlog_by_subscriber(session& db, double overdue_before,
                                                      const proto::id_set& which);
void record_partner_quotas(session& db, std::span<const partner_quota_row> rows);
std::vector<partner_quota_row> load_partner_quotas(session& db);

std::vector<lease_holder> other_live_owners(session& db, double now, const proto::id_set& which,
                                            const std::string& self);

}  // namespace surge::storage::pg
