#pragma once
// Helpers shared by the storage sources; not part of the storage API.
#include <string>
#include <string_view>

#include <SQLiteCpp/Statement.h>

#include "proto/id_set.hpp"

namespace surge::storage::detail {

// Resets a reused prepared statement when a use of it ends, however it ends. A statement left
// mid-step would keep its read snapshot open; and SQLiteCpp's reset() rethrows the error of a
// failed step, so a statement that failed once would fail every later use if reset() were used.
class statement_use {
 public:
  explicit statement_use(SQLite::Statement& statement) : statement_(statement) {
    statement_.tryReset();
  }
  ~statement_use() { statement_.tryReset(); }
  statement_use(const statement_use&) = delete;
  statement_use& operator=(const statement_use&) = delete;

 private:
  SQLite::Statement& statement_;
};

// A boolean SQL expression selecting `column` values in `which` ("1" when all): integer literals
// only, so it is safe to splice into statement text; valid SQL for SQLite and PostgreSQL alike.
std::string id_filter(const proto::id_set& which, std::string_view column);

}  // namespace surge::storage::detail
