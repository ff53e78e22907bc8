#pragma once
// Ownership leases on a SQLite queue (storage/ownership.hpp says how they work).
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include <SQLiteCpp/Database.h>

#include "proto/id_set.hpp"
#include "proto/ownership.hpp"
#include "storage/connection.hpp"
#include "storage/ownership.hpp"

namespace surge::storage::sqlite {

class ownership_keeper {
 public:
  // `allowed`: the subscribers this drainer may take (--subscribers). `heartbeat_seconds`: how
  // long one renewal keeps this drainer's ownerships alive. `subscriber_table`: the queue shape's
  // subscriber table, whose ids are what is owned.
  ownership_keeper(SQLite::Database& db, std::string name, proto::id_set allowed,
                   double heartbeat_seconds, std::string subscriber_table = "webhook_subscriber");

  // One BEGIN IMMEDIATE transaction: writes the heartbeat, reads the live drainers, the
  // subscribers and their owners, and takes and releases what proto::plan_ownership says.
  ownership_change renew(double now);

  // Whether this drainer owns `subscriber_id` at `now`, as of its last renewal: the claim's
  // fence. Called inside the claim's write transaction, so no other drainer can take the
  // subscriber between this answer and the claim.
  bool owns(std::int64_t subscriber_id, double now) const {
    return now < alive_until_ && owned_.contains(subscriber_id);
  }
  std::size_t owned_count(double now) const { return now < alive_until_ ? owned_.size() : 0; }
  const std::string& name() const { return name_; }
  // Renewals that read every subscriber and owner (the others only extended the heartbeat).
  std::int64_t full_renewals() const { return full_renewals_; }

  // At a clean stop, in one transaction: every ownership is released and the heartbeat removed,
  // so the other drainers take the subscribers at their next renewal.
  void release_all();

 private:
  SQLite::Database& db_;
  std::string name_;
  proto::id_set allowed_;
  std::string subscriber_table_;
  double heartbeat_seconds_;
  std::unordered_set<std::int64_t> owned_;
  double alive_until_ = 0;
  double started_at_ = 0;
  std::optional<proto::full_renewal> last_full_;
  std::int64_t full_renewals_ = 0;
};

std::vector<drainer_ownership> read_ownership(SQLite::Database& db, double now);

}  // namespace surge::storage::sqlite
