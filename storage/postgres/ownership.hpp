#pragma once
// Which subscribers this drain owns on a PostgreSQL queue, renewed through a heartbeat
// (storage/ownership.hpp is the SQLite side). Private to storage/.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_set>

#include "proto/id_set.hpp"
#include "proto/ownership.hpp"
#include "storage/ownership.hpp"
#include "storage/postgres/session.hpp"

namespace surge::storage::pg {

class ownership_keeper {
 public:
  // `db` must outlive the keeper.
  ownership_keeper(session& db, std::string owner, proto::id_set allowed, double heartbeat_seconds);

  // Renews this drain's heartbeat and, when the drainers or subscribers changed, takes and
  // releases subscribers by the shared plan. Its own transaction.
  ownership_change renew(double now);
  // Owned and still safe to claim for: the heartbeat has not run out, clock skew allowed for.
  bool owns(std::int64_t id, double now) const;
  std::size_t owned_count(double now) const;
  // At the stop: every subscriber released and the heartbeat withdrawn.
  void release_all();

 private:
  double claim_until() const;

  session& db_;
  std::string owner_;
  proto::id_set allowed_;
  double heartbeat_seconds_;
  std::unordered_set<std::int64_t> owned_;
  double alive_until_ = 0;
  double started_at_ = 0;
  std::optional<proto::full_renewal> last_full_;
};

}  // namespace surge::storage::pg
