#include "storage/connection.hpp"

#include <sqlite3.h>

#include "storage/sqlite/backend.hpp"
#include "storage/sqlite/database.hpp"

namespace surge::storage {
// The door: the neutral API's calls reach the SQLite backend's overloads from here only.
using namespace surge::storage::sqlite;

bool is_postgres_location(std::string_view location) {
  return location.starts_with("postgresql://") || location.starts_with("postgres://");
}

std::string printable_location(const std::string& location) {
  if (!is_postgres_location(location)) return location;
  const auto scheme = location.find("://");
  const auto at = location.find('@', scheme + 3);
  const auto slash = location.find('/', scheme + 3);
  if (at == std::string::npos || (slash != std::string::npos && slash < at)) return location;
  const auto colon = location.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return location;
  return location.substr(0, colon + 1) + "***" + location.substr(at);
}

connection::connection(const connection_config& config)
    : location_(config.location),
      named_shape_(config.shape),
      backend_(std::make_unique<backend>()) {
  if (is_postgres_location(config.location)) {
    backend_->postgres = std::make_unique<pg::session>(
        config.location, pg::session_limits{.interrupt = config.lock_wait});
    return;
  }
  try {
    backend_->sqlite.emplace(open_database({.path = config.location,
                                            .busy_timeout = config.busy_timeout,
                                            .create_if_missing = config.create_if_missing,
                                            .read_only = config.read_only,
                                            .cache_kib = config.cache_kib,
                                            .lock_wait = config.lock_wait}));
  } catch (const SQLite::Exception& failure) {
    throw from_sqlite(failure);
  }
}

connection::~connection() = default;
connection::connection(connection&&) noexcept = default;

bool connection::is_postgres() const { return backend_->postgres != nullptr; }

error from_sqlite(const SQLite::Exception& failure) {
  const int code = failure.getErrorCode() & 0xff;
  const std::string_view message = failure.what();
  switch (code) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return error(failure.what(), error::kind::busy);
    case SQLITE_FULL: return error(failure.what(), error::kind::disk_full);
    case SQLITE_READONLY:
    case SQLITE_PERM: return error(failure.what(), error::kind::read_only);
    // A constraint or trigger (RAISE) refused the row, or a value does not fit.
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_TOOBIG:
    case SQLITE_RANGE: return error(failure.what(), error::kind::row_rejected);
    default: break;
  }
  // A prepared statement whose table was dropped fails when SQLite prepares it again.
  if (code == SQLITE_ERROR &&
      (message.starts_with("no such table") || message.starts_with("no such column"))) {
    return error(failure.what(), error::kind::schema_missing);
  }
  return error(failure.what(), error::kind::other);
}

std::string with_remedy(const error& failure, const std::string& location) {
  const bool server = is_postgres_location(location);
  switch (failure.what_kind()) {
    case error::kind::read_only:
      return std::string("the queue refuses this drain's writes (") + failure.what() + "). " +
             (server ? "Surge needs a role that may SELECT, INSERT, UPDATE and DELETE on the "
                       "queue's tables, on a primary server, not a standby or a read-only "
                       "transaction default"
                     : "Surge needs write access to " + location +
                           ", its -wal and -shm files and its directory, as the user that runs it "
                           "(see chown/chmod)");
    case error::kind::schema_missing:
      return std::string("a table or column Surge needs is missing (") + failure.what() +
             "). Run `surge migrate --db " + printable_location(location) +
             "`: it adds what is missing and changes nothing else";
    case error::kind::database_gone:
      return std::string("the queue's database no longer exists (") + failure.what() +
             "): it was dropped or renamed while draining; rows and outcomes not yet written are "
             "lost with it";
    default: return failure.what();
  }
}

void not_on_postgres(std::string_view what) {
  throw error(std::string(what) + " is not available on a PostgreSQL queue yet",
              error::kind::unsupported);
}

}  // namespace surge::storage
