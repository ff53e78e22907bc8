#include "storage/postgres/session.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include <libpq-fe.h>

#include "storage/connection.hpp"
#include "storage/error.hpp"

namespace surge::storage::pg {
namespace {

std::string format_real(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  char buffer[32];
  const int length = std::snprintf(buffer, sizeof buffer, "%.17g", value);
  return std::string(buffer, static_cast<std::size_t>(length));
}

void append_quoted(std::string& out, std::string_view text) {
  out += '"';
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

}  // namespace

params& params::add(std::int64_t value) {
  values_.emplace_back(std::to_string(value));
  return *this;
}
params& params::add(double value) {
  values_.emplace_back(format_real(value));
  return *this;
}
params& params::add(std::string_view value) {
  values_.emplace_back(std::string(value));
  return *this;
}
params& params::add_null() {
  values_.emplace_back(std::nullopt);
  return *this;
}
params& params::add_array(std::span<const std::int64_t> values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(values[i]);
  }
  values_.emplace_back(out + "}");
  return *this;
}
params& params::add_array(std::span<const double> values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += format_real(values[i]);
  }
  values_.emplace_back(out + "}");
  return *this;
}
params& params::add_array(std::span<const std::string> values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    append_quoted(out, values[i]);
  }
  values_.emplace_back(out + "}");
  return *this;
}
params& params::add_array(std::span<const std::optional<std::string>> values) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    if (values[i]) {
      append_quoted(out, *values[i]);
    } else {
      out += "NULL";
    }
  }
  values_.emplace_back(out + "}");
  return *this;
}
std::vector<const char*> params::pointers() const {
  std::vector<const char*> out;
  out.reserve(values_.size());
  for (const auto& value : values_) out.push_back(value ? value->c_str() : nullptr);
  return out;
}

result::result(pg_result* handle) : handle_(handle) {}
result::~result() {
  if (handle_) PQclear(handle_);
}
result::result(result&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
int result::rows() const { return PQntuples(handle_); }
bool result::is_null(int row, int column) const { return PQgetisnull(handle_, row, column) != 0; }
std::string_view result::text(int row, int column) const {
  return {PQgetvalue(handle_, row, column),
          static_cast<std::size_t>(PQgetlength(handle_, row, column))};
}
std::int64_t result::int64(int row, int column) const {
  const auto value = text(row, column);
  std::int64_t out = 0;
  std::from_chars(value.data(), value.data() + value.size(), out);
  return out;
}
double result::real(int row, int column) const {
  if (is_null(row, column)) return 0;
  return std::strtod(PQgetvalue(handle_, row, column), nullptr);
}
std::int64_t result::affected() const {
  const char* count = PQcmdTuples(handle_);
  return count && *count ? std::strtoll(count, nullptr, 10) : 0;
}

session::session(std::string uri) : uri_(std::move(uri)) { ensure_connected(); }

session::~session() {
  if (conn_) PQfinish(conn_);
}

void session::ensure_connected() {
  if (conn_ && PQstatus(conn_) == CONNECTION_OK) return;
  if (conn_ && in_transaction_) {
    throw error("lost the connection to PostgreSQL inside a transaction; it was rolled back",
                error::kind::unreachable);
  }
  if (conn_) {
    PQreset(conn_);
  } else {
    conn_ = PQconnectdb(uri_.c_str());
  }
  if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
    std::string why = conn_ ? PQerrorMessage(conn_) : "out of memory";
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    // A connection never made is freed here: a constructor that throws runs no destructor.
    if (connections_ == 0 && conn_) {
      PQfinish(conn_);
      conn_ = nullptr;
    }
    throw error("cannot connect to PostgreSQL at " + printable_location(uri_) + ": " + why,
                error::kind::unreachable);
  }
  ++connections_;
  // Quiet: a NOTICE for "already exists" and the like would go to stderr otherwise.
  PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
  for (const auto& statement : on_connect_) checked(PQexec(conn_, statement.c_str()), statement);
}

void session::set_on_connect(std::string statement) {
  ensure_connected();
  checked(PQexec(conn_, statement.c_str()), statement);
  on_connect_.push_back(std::move(statement));
}

result session::checked(pg_result* handle, std::string_view sql) {
  result out(handle);
  const auto status = handle ? PQresultStatus(handle) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return out;
  const char* state = handle ? PQresultErrorField(handle, PG_DIAG_SQLSTATE) : nullptr;
  std::string message = handle ? PQresultErrorMessage(handle) : PQerrorMessage(conn_);
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  const bool lost = PQstatus(conn_) != CONNECTION_OK || (state && is_connection_failure(state));
  sql.remove_prefix(std::min(sql.find_first_not_of(" \n"), sql.size()));
  std::string first_line(sql.substr(0, sql.find('\n')));
  if (first_line.size() > 60) first_line = first_line.substr(0, 60) + "…";
  throw error("PostgreSQL: " + message + (state ? std::string(" [SQLSTATE ") + state + "]" : "") +
                  " (in: " + first_line + ")",
              lost ? error::kind::unreachable
                   : (state && std::string_view(state) == "55P03" ? error::kind::busy
                                                                   : error::kind::other));
}

result session::exec(std::string_view sql) {
  ensure_connected();
  const std::string text(sql);
  return checked(PQexec(conn_, text.c_str()), sql);
}

result session::exec(const std::string& sql, const params& values) {
  ensure_connected();
  const auto pointers = values.pointers();
  return checked(PQexecParams(conn_, sql.c_str(), static_cast<int>(pointers.size()), nullptr,
                              pointers.data(), nullptr, nullptr, 0),
                 sql);
}

std::vector<std::string> session::take_notifications() {
  std::vector<std::string> out;
  if (!conn_ || PQstatus(conn_) != CONNECTION_OK) return out;
  PQconsumeInput(conn_);
  while (PGnotify* note = PQnotifies(conn_)) {
    out.emplace_back(note->extra ? note->extra : "");
    PQfreemem(note);
  }
  return out;
}

bool session::in_transaction() const {
  return conn_ && PQtransactionStatus(conn_) == PQTRANS_INTRANS;
}

transaction::transaction(session& db, std::string_view begin) : db_(db) {
  db_.exec(begin);
  db_.in_transaction_ = true;
}

transaction::~transaction() {
  if (!open_) return;
  db_.in_transaction_ = false;
  try {
    db_.exec("ROLLBACK");
  } catch (const error&) {
    // The connection is gone: the server rolled the transaction back itself.
  }
}

void transaction::commit() {
  open_ = false;
  // Still marked inside the transaction while COMMIT runs: a COMMIT sent on a fresh connection
  // would only warn "no transaction in progress" and look like success.
  try {
    db_.exec("COMMIT");
  } catch (...) {
    db_.in_transaction_ = false;
    throw;
  }
  db_.in_transaction_ = false;
}

bool is_connection_failure(std::string_view sqlstate) {
  // Class 08 (connection exception) and 57P01-57P03 (admin shutdown, crash shutdown, cannot
  // connect now): the server went away or is restarting.
  return sqlstate.starts_with("08") || sqlstate == "57P01" || sqlstate == "57P02" ||
         sqlstate == "57P03";
}

}  // namespace surge::storage::pg
