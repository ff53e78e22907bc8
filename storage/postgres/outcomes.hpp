#pragma once
// Writing a batch of outcomes to the PostgreSQL queue, inside the caller's transaction. Private
// to storage/.
#include <cstdint>
#include <span>

#include "storage/outcomes.hpp"
#include "storage/postgres/session.hpp"

namespace surge::storage::pg {

// How a batch of outcomes is written: directly, or stepping over rows another session holds
// locked (each row locked first, which costs a WAL record of its own).
enum class lock_mode { direct, step_over };

// Each outcome fenced on its lease (a row whose fence failed is reported, not written), its
// attempt record inserted either way, and the subscribers in `deactivate` set inactive. Written
// `mode`'s way; a direct write that meets a lock another session holds is undone (to a savepoint
// of the caller's transaction) and done again stepping over it, and `mode` says so afterwards.
write_report apply_outcomes(session& db, std::span<const outcome> batch,
                            std::span<const std::int64_t> deactivate, lock_mode& mode);

}  // namespace surge::storage::pg
