#pragma once
// What a drain's storage thread does with the queue, behind one interface so
// the engine runs the same on a SQLite file and on PostgreSQL. Every call throws storage::error.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "proto/id_set.hpp"
#include "storage/change_watch.hpp"
#include "storage/claims.hpp"
#include "storage/cycle.hpp"
#include "storage/database.hpp"
#include "storage/maintenance.hpp"
#include "storage/outcomes.hpp"
#include "storage/ownership.hpp"
#include "storage/partner_quotas.hpp"
#include "storage/queue_shape.hpp"
#include "storage/subscribers.hpp"
#include "storage/token_leases.hpp"

namespace surge::storage {

struct drain_store_config {
  std::string location;  // a file path or a postgresql:// URI
  std::chrono::milliseconds busy_timeout{std::chrono::seconds(5)};
  const interruptible_wait* lock_wait = nullptr;  // must outlive the store
  int cache_kib = 0;                              // SQLite only
  std::int64_t checkpoint_frames = 0;             // SQLite only: WAL frames between checkpoints
  double token_reserve_seconds = 0.05;            // storage/token_leases.hpp
  double ownership_heartbeat_seconds = 4;         // storage/ownership.hpp
  proto::id_set allowed;                          // --subscribers
  // Names this drain's leases and ownerships; empty: "surge@host:pid" (default_lease_owner).
  std::string owner;
  // The queue shape (storage/queue_shape.hpp) the operator named, or the drain found at start;
  // nullopt: whichever the database holds. seed001 exists on SQLite only.
  std::optional<queue_shape> shape;
};

// How much the store wrote to its log (SQLite's WAL); zeros where there is no such count.
struct write_counters {
  std::int64_t commits = 0;
  std::int64_t frames = 0;
};

class drain_store {
 public:
  virtual ~drain_store() = default;

  // "surge@host:pid": names this drain's leases and ownerships.
  virtual const std::string& owner() const = 0;

  // One transaction: the outcomes (fenced on their leases), then tokens and rows for the
  // subscribers this drain owns (storage/cycle.hpp).
  virtual cycle_result write_and_claim(std::span<const outcome> outcomes,
                                       std::span<const std::int64_t> deactivate,
                                       std::span<const subscriber_demand> demand, double now,
                                       double lease_seconds, std::int64_t max_payload_bytes) = 0;
  virtual write_report write_outcomes(std::span<const outcome> outcomes,
                                      std::span<const std::int64_t> deactivate) = 0;
  virtual void give_back_tokens(std::span<const unspent_tokens> tokens, double now) = 0;
  // The partners' latest announced quotas (storage/partner_quotas.hpp), one transaction.
  virtual void record_partner_quotas(std::span<const partner_quota_row> rows) = 0;

  virtual std::vector<subscriber_row> load_subscribers(const proto::id_set& which) = 0;
  virtual std::int64_t dead_letter_orphans(double now, const proto::id_set& which) = 0;
  virtual malformed_rows dead_letter_malformed(double now, double lease_horizon,
                                               const proto::id_set& which) = 0;
  virtual std::int64_t count_outstanding(double now, const proto::id_set& which) = 0;
  virtual std::optional<double> earliest_scheduled(double now, const proto::id_set& which) = 0;

  // A trivial read that proves the database answers.
  virtual void ping() = 0;
  // Empty while the queue this store opened is where it was; otherwise what is gone (a SQLite
  // file or its write-ahead log deleted or replaced under the drain), for the drain's error. A
  // database server's queue cannot vanish that way.
  virtual std::string missing_file() = 0;
  // After missing_file() found the write-ahead log gone: copies what this connection still
  // holds of it into the queue file, so that the outcomes written since the last checkpoint are
  // not lost with it. Says what it did.
  virtual std::string rescue_lost_log() = 0;
  // Rows other programs queued since the last call (outside any transaction).
  virtual new_rows check_new_rows(double now) = 0;

  virtual ownership_change renew_ownership(double now) = 0;
  virtual std::size_t owned_count(double now) const = 0;
  virtual void release_ownership() = 0;

  virtual write_counters counters() const = 0;
};

// Opens the queue (it must exist and be migrated) for a drain. Throws storage::error.
std::unique_ptr<drain_store> open_drain_store(const drain_store_config& config);

}  // namespace surge::storage
