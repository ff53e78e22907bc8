#pragma once
// What goes to a PostgreSQL statement and what comes back: parameters in libpq's text format and
// a result read as text. Private to storage/.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct pg_conn;
struct pg_result;

namespace surge::storage::pg {

// Parameters in libpq's text format, arrays as PostgreSQL array literals; but arrays of doubles
// in the binary format: converting a double to text and back costs the client and the server
// about half a microsecond each, and a batch's outcome and attempt records carry five a row.
// (A binary array must name its element type as the statement casts it: `::float8[]`.)
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

 private:
  friend int send_query(pg_conn* conn, const std::string& sql, const params& values);
  friend int send_prepared(pg_conn* conn, const std::string& name, const params& values);
  std::vector<std::optional<std::string>> values_;
  std::vector<int> formats_;  // libpq's: 0 text, 1 binary
};

// PQsendQueryParams with `values`; libpq's answer (0: not sent).
int send_query(pg_conn* conn, const std::string& sql, const params& values);
// PQsendQueryPrepared of the statement prepared as `name`, with `values`; libpq's answer.
int send_prepared(pg_conn* conn, const std::string& name, const params& values);

class result {
 public:
  explicit result(pg_result* handle);
  ~result();
  result(result&& other) noexcept;
  result& operator=(result&&) = delete;
  result(const result&) = delete;

  int rows() const;
  int columns() const;
  bool is_null(int row, int column) const;
  std::string_view text(int row, int column) const;
  std::int64_t int64(int row, int column) const;  // 0 when NULL
  double real(int row, int column) const;         // 0 when NULL
  std::int64_t affected() const;                  // rows an UPDATE/DELETE/INSERT touched

 private:
  pg_result* handle_;
};

}  // namespace surge::storage::pg
