#pragma once
// The one exception the queue's functions throw, whichever database is behind them: callers
// outside storage/ catch this, never a database library's own exception.
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
    // The database refused the values of a row in the statement (a constraint, another
    // program's trigger, a number out of the column's range): the fault is the row's, and the
    // same statement without that row would succeed.
    row_rejected,
    // This user or role may not write the queue (a read-only file, a read-only role, a
    // standby): nothing the drain can do fixes it.
    read_only,
    // A table or column the statement needs is gone (Surge's own tables dropped, a schema
    // older than this build): `surge migrate` fixes it.
    schema_missing,
    // The statement was cancelled by a statement timeout: a smaller one may finish in time.
    timed_out,
    // The database is not a queue of a shape Surge can use (storage/queue_shape.hpp): empty, of
    // no known shape, half-migrated, of both shapes with none named, or a shape this kind of
    // database does not carry. The operator points Surge elsewhere or names a shape.
    bad_shape,
    // The database the queue lives in is gone (a PostgreSQL database dropped while draining):
    // nothing comes back by waiting, as for a deleted SQLite file.
    database_gone,
  };
  explicit error(const std::string& message, kind what = kind::other)
      : std::runtime_error(message), kind_(what) {}
  kind what_kind() const { return kind_; }

 private:
  kind kind_;
};

// Faults the drain cannot outlast by waiting: it stops, naming the cause and the fix.
inline bool is_fatal(const error& failure) {
  return failure.what_kind() == error::kind::read_only ||
         failure.what_kind() == error::kind::schema_missing ||
         failure.what_kind() == error::kind::database_gone;
}

// `failure`'s message followed by what an operator does about it, for the faults the drain
// cannot outlast (is_fatal); the message alone for the others. `location` is what --db named.
std::string with_remedy(const error& failure, const std::string& location);

}  // namespace surge::storage
