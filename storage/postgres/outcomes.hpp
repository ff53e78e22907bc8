#pragma once
// Writing a batch of outcomes to the PostgreSQL queue, inside the caller's transaction. Private
// to storage/.
#include <cstdint>
#include <span>

#include "storage/outcomes.hpp"
#include "storage/postgres/session.hpp"

namespace surge::storage::pg {

// Each outcome fenced on its lease (a row whose fence failed is reported, not written), its
// attempt record inserted either way, and the subscribers in `deactivate` set inactive.
write_report apply_outcomes(session& db, std::span<const outcome> batch,
                            std::span<const std::int64_t> deactivate);

}  // namespace surge::storage::pg
