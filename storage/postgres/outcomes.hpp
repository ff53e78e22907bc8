#pragma once
// Writing a batch of outcomes to the PostgreSQL queue, inside the caller's transaction. Private
// to storage/.
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>

#include "storage/outcomes.hpp"
#include "storage/postgres/session.hpp"

namespace surge::storage::pg {

// Where each row this drain leased sits in the table: its ctid after the lease, as the claim
// returned it. An outcome written directly reads its row there (a TID scan) instead of down the
// primary key and the lease's HOT chain, about 4 µs a row less on the server. A place is only a
// hint: the outcome still matches the id and the lease, and a row not found at its place (moved
// by another session's update, or the table rewritten by VACUUM FULL) is written by id.
class row_places {
 public:
  void leased(std::int64_t id, double lease, std::string place);
  // The place of `id` leased under `lease`, or empty; either way it is forgotten.
  std::string take(std::int64_t id, double lease);
  std::size_t size() const { return places_.size(); }

 private:
  struct place {
    double lease = 0;
    std::string ctid;
  };
  std::unordered_map<std::int64_t, place> places_;
};

// How a batch of outcomes is written: directly, or stepping over rows another session holds
// locked (each row locked first, which costs a WAL record of its own).
enum class lock_mode { direct, step_over };

// Each outcome fenced on its lease (a row whose fence failed is reported, not written), its
// attempt record inserted either way, and the subscribers in `deactivate` set inactive. Written
// `mode`'s way; a direct write that meets a lock another session holds is undone (to a savepoint
// of the caller's transaction) and done again stepping over it, and `mode` says so afterwards.
// Rows with a place in `places` (which forgets them) are read there when written directly.
write_report apply_outcomes(session& db, std::span<const outcome> batch,
                            std::span<const std::int64_t> deactivate, lock_mode& mode,
                            row_places* places = nullptr);

}  // namespace surge::storage::pg
