#pragma once
// Statement pieces the seed001 sources share. Private to storage/.
#include <string>
#include <string_view>

namespace surge::storage::sqlite::seed001 {

// Free, as the shape's own worker reads a lease (`leased_until < :now` with :now in whole
// seconds): the worker holds a row it leased until `until` through that whole second, so the row
// is free only once the whole-second clock has passed the lease. `now` is a parameter name or
// number holding Unix seconds with a fraction.
inline std::string free_at(std::string_view now) {
  return "leased_until < CAST(" + std::string(now) + " AS INTEGER)";
}
// The opposite: held by someone (the worker or a Surge drain) at `now`.
inline std::string held_at(std::string_view now) {
  return "leased_until >= CAST(" + std::string(now) + " AS INTEGER)";
}

// Why a row failed or died, kept in Surge's own table (the shape has no such columns):
// ?1 delivery id, ?2 last status (NULL: no response), ?3 last error, ?4 when.
inline constexpr const char* note_sql =
    "INSERT OR REPLACE INTO surge_delivery_note(delivery_id, last_status, last_error, noted_at) "
    "VALUES (?1, ?2, ?3, ?4)";

// The per-subscriber due index Surge adds, for claims oldest due first per subscriber.
inline constexpr const char* due_index = "surge_deliveries_subscriber_due";

}  // namespace surge::storage::sqlite::seed001
