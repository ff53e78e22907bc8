#pragma once
// The one exception the queue's functions throw, whichever database is behind them: callers
// outside storage/ catch this, never a SQLite or libpq type.
#include <stdexcept>
#include <string>

namespace surge::storage {

class error : public std::runtime_error {
 public:
  enum class kind {
    other,
    busy,         // another writer holds the lock past the wait (SQLite) or a lock timed out
    unreachable,  // no connection to the database server, or it was lost
    unsupported,  // the operation does not exist for this kind of queue
    disk_full,    // the database's disk refused to grow the file or its WAL (SQLite)
  };
  explicit error(const std::string& message, kind what = kind::other)
      : std::runtime_error(message), kind_(what) {}
  kind what_kind() const { return kind_; }

 private:
  kind kind_;
};

}  // namespace surge::storage
