#pragma once
// Raw SQL on a test's queue, whichever database holds it: a SQLite file or a PostgreSQL URI.
// Statements use `?` placeholders, as PDO programs write them; on PostgreSQL they become $1, $2…
// as PDO's pgsql driver does. Values go in and come out as text (nullopt is NULL).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace surge::testing {

class sql_client {
 public:
  using value = std::optional<std::string>;
  using row = std::vector<value>;

  // Throws std::runtime_error when the database cannot be opened.
  explicit sql_client(const std::string& location);
  ~sql_client();
  sql_client(sql_client&&) noexcept;
  sql_client& operator=(sql_client&&) = delete;

  // Runs one statement and returns its rows; throws std::runtime_error with the database's
  // message on failure.
  std::vector<row> query(const std::string& sql, const std::vector<value>& params = {});
  // Runs one statement and returns the rows it changed.
  std::int64_t exec(const std::string& sql, const std::vector<value>& params = {});
  // The first column of the first row as a number (0 when NULL or no row).
  double number(const std::string& sql, const std::vector<value>& params = {});

  // BEGIN IMMEDIATE on SQLite (the queue contract's write transaction), BEGIN on PostgreSQL.
  void begin();
  void commit();

  bool is_postgres() const;
  // `?` placeholders numbered for PostgreSQL ($1, $2, …), outside quoted literals.
  static std::string numbered(const std::string& sql);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace surge::testing
