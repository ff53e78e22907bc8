#pragma once
// A connection to the queue, wherever it lives: a SQLite file (the embedded default) or a
// PostgreSQL database named by a `postgresql://` URI. The storage functions that take a
// `connection&` run on either and throw storage::error, so the engine and the tools never see
// which database is behind it.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "storage/database.hpp"
#include "storage/error.hpp"
#include "storage/queue_shape.hpp"

namespace surge::storage {

class queue_database;
class queue_backend;

struct connection_config {
  std::string location;  // a file path, or a postgresql:// (postgres://) URI
  std::chrono::milliseconds busy_timeout{std::chrono::seconds(10)};
  bool create_if_missing = true;  // SQLite only: a database server's database must exist
  bool read_only = false;
  int cache_kib = 0;  // SQLite only
  // Cuts lock waits short (SQLite) and waits for the server (PostgreSQL); must outlive the
  // connection.
  const interruptible_wait* lock_wait = nullptr;
  // The queue shape the operator named (--queue-shape); nullopt: whichever the database holds.
  std::optional<queue_shape> shape;
};

// Whether `location` names a PostgreSQL database rather than a file.
bool is_postgres_location(std::string_view location);
// `location` with a URI's password masked ("postgresql://user:***@host/db"), for logs and errors.
std::string printable_location(const std::string& location);

class connection {
 public:
  // Throws storage::error when the file cannot be opened or the server cannot be reached.
  explicit connection(const connection_config& config);
  ~connection();
  connection(connection&&) noexcept;
  connection& operator=(connection&&) = delete;

  bool is_postgres() const;
  // What --db named.
  const std::string& location() const { return location_; }

  // Which shape the queue is, read from its tables on first use (storage/queue_shape.hpp).
  // Throws storage::error, kind bad_shape, when it cannot be used: empty, of no known shape,
  // half-migrated, of both shapes with none named, or seed001 on PostgreSQL.
  queue_shape shape();
  std::optional<queue_shape> named_shape() const { return named_shape_; }

  // The backend (storage/queue_backend.hpp, inside storage/ only): for what is the same in every
  // shape, and for the rest, once shape() has read which shape the queue is.
  queue_database& database();
  queue_backend& queue();

 private:
  std::string location_;
  std::optional<queue_shape> named_shape_;
  std::optional<queue_shape> shape_;  // once known
  std::unique_ptr<queue_backend> backend_;
};

}  // namespace surge::storage
