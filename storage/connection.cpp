// The one place a location picks its backend, for a tool's connection and a drain's store.
#include "storage/connection.hpp"

#include "storage/drain_store.hpp"
#include "storage/queue_backend.hpp"

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
    : location_(config.location),
      named_shape_(config.shape),
      backend_(is_postgres_location(config.location) ? pg::open_queue_backend(config)
                                                     : sqlite::open_queue_backend(config)) {}

connection::~connection() = default;
connection::connection(connection&&) noexcept = default;

bool connection::is_postgres() const { return backend_->is_postgres(); }

queue_database& connection::database() { return *backend_; }

queue_backend& connection::queue() {
  backend_->use_shape(shape());
  return *backend_;
}

std::unique_ptr<drain_store> open_drain_store(const drain_store_config& config) {
  if (is_postgres_location(config.location)) {
    if (config.shape == queue_shape::seed001)
      throw error(seed001_not_on_postgres(printable_location(config.location)),
                  error::kind::bad_shape);
    return pg::open_drain_store(config);
  }
  return sqlite::open_drain_store(config);
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

void not_on_seed001(std::string_view what) {
  throw error(std::string(what) + " is not available on a seed001 queue", error::kind::unsupported);
}

}  // namespace surge::storage
