#include "storage/connection.hpp"

#include <sqlite3.h>

#include "storage/backend.hpp"

namespace surge::storage {

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
    : location_(config.location), backend_(std::make_unique<backend>()) {
  if (is_postgres_location(config.location)) {
    backend_->postgres = std::make_unique<pg::session>(config.location);
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
  if (code == SQLITE_BUSY || code == SQLITE_LOCKED) return error(failure.what(), error::kind::busy);
  if (code == SQLITE_FULL) return error(failure.what(), error::kind::disk_full);
  return error(failure.what(), error::kind::other);
}

void not_on_postgres(std::string_view what) {
  throw error(std::string(what) + " is not available on a PostgreSQL queue yet",
              error::kind::unsupported);
}

}  // namespace surge::storage
