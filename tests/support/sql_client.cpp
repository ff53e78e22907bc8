#include "tests/support/sql_client.hpp"

#include <stdexcept>

#include <libpq-fe.h>
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

namespace surge::testing {

struct sql_client::impl {
  std::unique_ptr<SQLite::Database> file;
  PGconn* server = nullptr;
  ~impl() {
    if (server) PQfinish(server);
  }
};

sql_client::sql_client(const std::string& location) : impl_(std::make_unique<impl>()) {
  if (location.starts_with("postgresql://") || location.starts_with("postgres://")) {
    impl_->server = PQconnectdb(location.c_str());
    if (PQstatus(impl_->server) != CONNECTION_OK) {
      throw std::runtime_error("connecting to " + location + ": " + PQerrorMessage(impl_->server));
    }
    PQsetNoticeProcessor(
        impl_->server, [](void*, const char*) {}, nullptr);
    return;
  }
  impl_->file = std::make_unique<SQLite::Database>(location, SQLite::OPEN_READWRITE, 10000);
}

sql_client::~sql_client() = default;
sql_client::sql_client(sql_client&&) noexcept = default;

bool sql_client::is_postgres() const { return impl_->server != nullptr; }

std::string sql_client::numbered(const std::string& sql) {
  std::string out;
  int next = 1;
  bool quoted = false;
  for (const char c : sql) {
    if (c == '\'') quoted = !quoted;
    if (c == '?' && !quoted) {
      out += '$' + std::to_string(next++);
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

void bind_all(SQLite::Statement& statement, const std::vector<sql_client::value>& params) {
  for (std::size_t i = 0; i < params.size(); ++i) {
    const int index = static_cast<int>(i + 1);
    if (params[i]) {
      statement.bind(index, *params[i]);
    } else {
      statement.bind(index);
    }
  }
}

// The result of one statement on PostgreSQL; throws with the server's message on failure.
std::unique_ptr<PGresult, void (*)(PGresult*)> run(PGconn* server, const std::string& sql,
                                                   const std::vector<sql_client::value>& params) {
  std::vector<const char*> values;
  for (const auto& param : params) values.push_back(param ? param->c_str() : nullptr);
  const std::string text = sql_client::numbered(sql);
  std::unique_ptr<PGresult, void (*)(PGresult*)> result(
      PQexecParams(server, text.c_str(), static_cast<int>(values.size()), nullptr, values.data(),
                   nullptr, nullptr, 0),
      PQclear);
  const auto status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    throw std::runtime_error(sql + ": " + PQerrorMessage(server));
  }
  return result;
}

}  // namespace

std::vector<sql_client::row> sql_client::query(const std::string& sql,
                                               const std::vector<value>& params) {
  std::vector<row> rows;
  if (impl_->file) {
    SQLite::Statement statement(*impl_->file, sql);
    bind_all(statement, params);
    while (statement.executeStep()) {
      row& out = rows.emplace_back();
      for (int c = 0; c < statement.getColumnCount(); ++c) {
        const auto column = statement.getColumn(c);
        out.push_back(column.isNull() ? value() : value(column.getString()));
      }
    }
    return rows;
  }
  const auto result = run(impl_->server, sql, params);
  for (int r = 0; r < PQntuples(result.get()); ++r) {
    row& out = rows.emplace_back();
    for (int c = 0; c < PQnfields(result.get()); ++c) {
      out.push_back(PQgetisnull(result.get(), r, c) ? value()
                                                    : value(PQgetvalue(result.get(), r, c)));
    }
  }
  return rows;
}

std::int64_t sql_client::exec(const std::string& sql, const std::vector<value>& params) {
  if (impl_->file) {
    SQLite::Statement statement(*impl_->file, sql);
    bind_all(statement, params);
    return statement.exec();
  }
  const auto result = run(impl_->server, sql, params);
  const char* changed = PQcmdTuples(result.get());
  return changed && *changed ? std::stoll(changed) : 0;
}

double sql_client::number(const std::string& sql, const std::vector<value>& params) {
  const auto rows = query(sql, params);
  if (rows.empty() || rows[0].empty() || !rows[0][0]) return 0;
  return std::stod(*rows[0][0]);
}

void sql_client::begin() { exec(is_postgres() ? "BEGIN" : "BEGIN IMMEDIATE"); }
void sql_client::commit() { exec("COMMIT"); }

}  // namespace surge::testing
