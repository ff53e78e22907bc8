#pragma once
// One libpq connection and the few things the PostgreSQL queue does with it: run a statement
// with text parameters, read text results, hold a transaction. Private to storage/.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct pg_conn;
struct pg_result;

namespace surge::storage::pg {

// Parameters in libpq's text format; arrays as PostgreSQL array literals.
class params {
 public:
  params& add(std::int64_t value);
  params& add(int value) { return add(static_cast<std::int64_t>(value)); }
  params& add(double value);
  params& add(std::string_view value);
  params& add(const char* value) { return add(std::string_view(value)); }
  params& add_null();
  params& add_array(std::span<const std::int64_t> values);
  params& add_array(std::span<const double> values);
  params& add_array(std::span<const std::string> values);
  params& add_array(std::span<const std::optional<std::string>> values);
  std::size_t size() const { return values_.size(); }
  std::vector<const char*> pointers() const;

 private:
  std::vector<std::optional<std::string>> values_;
};

class result {
 public:
  explicit result(pg_result* handle);
  ~result();
  result(result&& other) noexcept;
  result& operator=(result&&) = delete;
  result(const result&) = delete;

  int rows() const;
  bool is_null(int row, int column) const;
  std::string_view text(int row, int column) const;
  std::int64_t int64(int row, int column) const;  // 0 when NULL
  double real(int row, int column) const;         // 0 when NULL
  std::int64_t affected() const;                  // rows an UPDATE/DELETE/INSERT touched

 private:
  pg_result* handle_;
};

class session {
 public:
  // `uri`: a libpq connection URI. Throws storage::error (kind unreachable) when the server
  // cannot be reached or refuses.
  explicit session(std::string uri);
  ~session();
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  // Runs one statement; throws storage::error naming the SQLSTATE on failure. A connection
  // found broken is re-established once first, so a restarted server costs one failed call.
  result exec(std::string_view sql);
  result exec(const std::string& sql, const params& values);

  // A setting for this session (`SET …`), made now and again on every new connection.
  void set_on_connect(std::string statement);

  // Notifications received on channels this session listens on, since the last call.
  std::vector<std::string> take_notifications();

  bool in_transaction() const;
  // Connections made so far: it grows when a lost connection was re-established, and with it
  // what the session had set up (LISTEN) is gone.
  std::int64_t connections() const { return connections_; }
  const std::string& uri() const { return uri_; }

 private:
  friend class transaction;
  void ensure_connected();
  result checked(pg_result* handle, std::string_view sql);

  std::string uri_;
  pg_conn* conn_ = nullptr;
  // Inside a transaction a lost connection is never re-established: the statements after it
  // would run outside the transaction.
  bool in_transaction_ = false;
  std::int64_t connections_ = 0;
  std::vector<std::string> on_connect_;
};

// BEGIN … COMMIT, rolled back when left without commit (exceptions included).
class transaction {
 public:
  explicit transaction(session& db, std::string_view begin = "BEGIN");
  ~transaction();
  transaction(const transaction&) = delete;
  transaction& operator=(const transaction&) = delete;
  void commit();

 private:
  session& db_;
  bool open_ = true;
};

// The statements' names for the queue's SQLSTATE classes worth telling apart.
bool is_connection_failure(std::string_view sqlstate);

}  // namespace surge::storage::pg
