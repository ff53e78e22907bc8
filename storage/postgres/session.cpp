#include "storage/postgres/session.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include <libpq-fe.h>

#include "storage/connection.hpp"
#include "storage/error.hpp"

namespace surge::storage::pg {

session::session(std::string uri, session_limits limits) : uri_(std::move(uri)), limits_(limits) {
  try {
    ensure_connected();
  } catch (...) {
    // No destructor runs for an object whose constructor threw: the connection goes here.
    drop_connection();
    throw;
  }
}

session::~session() {
  if (conn_) PQfinish(conn_);
}

void session::drop_connection() {
  if (conn_) PQfinish(conn_);
  conn_ = nullptr;
  prepared_.clear();  // they lived on the connection
}

void session::wait_socket(short events, std::chrono::steady_clock::time_point deadline,
                          std::string_view what) {
  using namespace std::chrono;
  // Short slices, so a stop's interrupt is seen within one.
  constexpr auto slice = milliseconds(50);
  while (true) {
    if (limits_.interrupt && limits_.interrupt->give_up.load()) {
      drop_connection();
      throw error("gave up waiting for PostgreSQL " + std::string(what) + ": the drain is stopping",
                  error::kind::unreachable);
    }
    const auto now = steady_clock::now();
    if (now >= deadline) {
      drop_connection();
      throw error("PostgreSQL at " + printable_location(uri_) + " did not answer " +
                      std::string(what) + " in time; the connection was dropped",
                  error::kind::unreachable);
    }
    pollfd watched{.fd = PQsocket(conn_), .events = events, .revents = 0};
    if (watched.fd < 0) {
      drop_connection();
      throw error("lost the connection to PostgreSQL " + std::string(what),
                  error::kind::unreachable);
    }
    const auto wait = std::min<steady_clock::duration>(slice, deadline - now);
    const int ready =
        ::poll(&watched, 1, static_cast<int>(duration_cast<milliseconds>(wait).count()) + 1);
    if (ready > 0) return;
    if (ready < 0 && errno != EINTR) {
      drop_connection();
      throw error(std::string("waiting for PostgreSQL failed: ") + std::strerror(errno),
                  error::kind::unreachable);
    }
  }
}

void session::connect() {
  // The URI's own connect_timeout, if it has one, comes later in the arrays and wins.
  const std::string timeout = std::to_string(std::max<long long>(
      1, static_cast<long long>((limits_.connect_timeout.count() + 999) / 1000)));
  const char* keywords[] = {"connect_timeout", "dbname", nullptr};
  const char* values[] = {timeout.c_str(), uri_.c_str(), nullptr};
  conn_ = PQconnectStartParams(keywords, values, 1);
  auto fail = [&](std::string why) {
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    drop_connection();
    // A refused startup carries no SQLSTATE through libpq, only the server's FATAL text: a
    // database that does not exist (3D000) is gone for good, not unreachable for a while.
    const bool gone = why.find("FATAL:  database \"") != std::string::npos &&
                      why.find("\" does not exist") != std::string::npos;
    throw error("cannot connect to PostgreSQL at " + printable_location(uri_) + ": " + why,
                gone ? error::kind::database_gone : error::kind::unreachable);
  };
  if (!conn_) fail("out of memory");
  if (PQstatus(conn_) == CONNECTION_BAD) fail(PQerrorMessage(conn_));
  // PQconnectPoll does not enforce connect_timeout; the effective value (ours or the URI's)
  // bounds the whole handshake here.
  auto limit = std::chrono::seconds(10);
  if (PQconninfoOption* options = PQconninfo(conn_)) {
    for (auto* option = options; option->keyword; ++option) {
      if (std::string_view(option->keyword) == "connect_timeout" && option->val) {
        const long seconds = std::strtol(option->val, nullptr, 10);
        if (seconds > 0) limit = std::chrono::seconds(seconds);
      }
    }
    PQconninfoFree(options);
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  auto polled = PGRES_POLLING_WRITING;
  while (polled != PGRES_POLLING_OK) {
    if (polled == PGRES_POLLING_FAILED) fail(PQerrorMessage(conn_));
    try {
      wait_socket(polled == PGRES_POLLING_READING ? POLLIN : POLLOUT, deadline, "while connecting");
    } catch (const error&) {
      fail("no answer within " + std::to_string(limit.count()) +
           " s (connect_timeout; the server may be stopped, or the port is not PostgreSQL)");
    }
    polled = PQconnectPoll(conn_);
  }
  if (PQsetnonblocking(conn_, 1) != 0) fail(PQerrorMessage(conn_));
}

void session::ensure_connected() {
  if (conn_ && PQstatus(conn_) == CONNECTION_OK) return;
  if (in_transaction_) {
    throw error("lost the connection to PostgreSQL inside a transaction; it was rolled back",
                error::kind::unreachable);
  }
  drop_connection();
  connect();
  ++connections_;
  // Quiet: a NOTICE for "already exists" and the like would go to stderr otherwise.
  PQsetNoticeProcessor(
      conn_, [](void*, const char*) {}, nullptr);
  const std::string bounds = bounds_statement();
  PQsendQuery(conn_, bounds.c_str());
  checked(await_result(bounds), bounds);
  for (const auto& statement : on_connect_) {
    PQsendQuery(conn_, statement.c_str());
    checked(await_result(statement), statement);
  }
}

std::chrono::steady_clock::time_point session::answer_deadline(int statements) const {
  if (statement_timeout_lifted_ || limits_.statement_timeout.count() == 0) {
    return std::chrono::steady_clock::time_point::max();
  }
  return std::chrono::steady_clock::now() + statements * limits_.statement_timeout +
         limits_.silence_margin;
}

pg_result* session::await_result(std::string_view sql) {
  const auto deadline = answer_deadline();
  const std::string what = "to a statement (" + std::string(sql.substr(0, 40)) + "…)";
  if (!flush_output(deadline, what)) return nullptr;
  return collect_results(deadline, what);
}

bool session::flush_output(std::chrono::steady_clock::time_point deadline,
                           const std::string& what) {
  // Everything queued goes out first; a full socket buffer waits for the server to read.
  while (true) {
    const int flushed = PQflush(conn_);
    if (flushed == 0) return true;
    if (flushed < 0) return false;
    wait_socket(POLLOUT | POLLIN, deadline, what);
    if (PQconsumeInput(conn_) == 0) return false;
  }
}

namespace {
bool failed(pg_result* one) {
  const auto status = PQresultStatus(one);
  return status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK && status != PGRES_EMPTY_QUERY;
}
}  // namespace

pg_result* session::collect_results(std::chrono::steady_clock::time_point deadline,
                                    const std::string& what) {
  pg_result* kept = nullptr;
  // The first failed result, else the last, as PQexec would.
  auto keep = [&](pg_result* next) {
    if (kept && failed(kept)) {
      PQclear(next);
      return;
    }
    if (kept) PQclear(kept);
    kept = next;
  };
  while (true) {
    while (PQisBusy(conn_) == 0) {
      pg_result* next = PQgetResult(conn_);
      if (next == nullptr) return kept;
      keep(next);
    }
    try {
      wait_socket(POLLIN, deadline, what);
    } catch (...) {
      if (kept) PQclear(kept);
      throw;
    }
    if (PQconsumeInput(conn_) == 0) {
      if (kept) PQclear(kept);
      return nullptr;
    }
  }
}

result session::exec_pipelined(const std::string* sql, const params* values) {
  auto queued = std::exchange(queued_, {});
  if (sql) queued.push_back({*sql, values ? *values : params()});
  ensure_connected();
  // The server's statement timeout applies to each statement in turn.
  const auto deadline = answer_deadline(static_cast<int>(queued.size()));
  const std::string what = "to " + std::to_string(queued.size()) + " statements (" +
                           queued.back().sql.substr(0, 40) + "…)";
  // Whatever goes wrong midway leaves the pipeline's state unknown: the connection is dropped
  // (inside a transaction, the transaction with it), after libpq's message is taken.
  auto broken = [&](const std::string& in) -> result {
    try {
      checked(nullptr, in);  // throws: there is no result
    } catch (...) {
      drop_connection();
      throw;
    }
    return result(nullptr);
  };
  if (PQenterPipelineMode(conn_) == 0) return broken(queued.front().sql);
  // What was sent, in order: each statement, after its preparation when this is its first use.
  struct sent_command {
    const queued_statement* statement;
    bool preparation;
  };
  std::vector<sent_command> sent;
  sent.reserve(queued.size() * 2);
  for (const auto& statement : queued) {
    bool to_prepare = false;
    const std::string name = name_for(statement, to_prepare);
    if (to_prepare) {
      if (PQsendPrepare(conn_, name.c_str(), statement.sql.c_str(),
                        static_cast<int>(statement.values.size()), nullptr) == 0) {
        return broken(statement.sql);
      }
      sent.push_back({&statement, true});
    }
    const int queued_ok = name.empty() ? send_query(conn_, statement.sql, statement.values)
                                       : send_prepared(conn_, name, statement.values);
    if (queued_ok == 0) return broken(statement.sql);
    sent.push_back({&statement, false});
  }
  if (PQpipelineSync(conn_) == 0 || !flush_output(deadline, what)) {
    return broken(queued.back().sql);
  }
  using owned = std::unique_ptr<pg_result, decltype(&PQclear)>;
  owned first_failure(nullptr, &PQclear);
  owned last(nullptr, &PQclear);
  const std::string* failed_sql = nullptr;
  for (const auto& command : sent) {
    const std::string& sql = command.statement->sql;
    owned one(collect_results(deadline, what), &PQclear);  // a wait that ends throws
    if (!one) return broken(sql);
    // A preparation that failed, or never ran because the pipeline aborted before it, leaves no
    // statement by that name: the next use prepares it again.
    if (command.preparation && PQresultStatus(one.get()) != PGRES_COMMAND_OK) prepared_.erase(sql);
    // A statement whose plan a schema change made stale (0A000), or that the server no longer
    // knows (26000), is prepared afresh, under a new name, the next time.
    if (const char* state = PQresultErrorField(one.get(), PG_DIAG_SQLSTATE);
        !command.preparation && state &&
        (std::string_view(state) == "0A000" || std::string_view(state) == "26000")) {
      prepared_.erase(sql);
    }
    if (!first_failure && failed(one.get())) {
      first_failure = std::move(one);
      failed_sql = &sql;
    } else if (!command.preparation) {
      last = std::move(one);
    }
  }
  // The sync's own marker ends the pipeline.
  while (true) {
    owned marker(PQisBusy(conn_) == 0 ? PQgetResult(conn_) : nullptr, &PQclear);
    if (marker && PQresultStatus(marker.get()) == PGRES_PIPELINE_SYNC) break;
    if (marker) continue;
    wait_socket(POLLIN, deadline, what);
    if (PQconsumeInput(conn_) == 0) return broken(queued.back().sql);
  }
  if (PQexitPipelineMode(conn_) == 0) return broken(queued.back().sql);
  if (first_failure) return checked(first_failure.release(), *failed_sql);  // throws
  return checked(last.release(), queued.back().sql);
}

session::unbounded::unbounded(session& db) : db_(db) {
  db_.statement_timeout_lifted_ = true;
  db_.exec("SET statement_timeout = 0; SET lock_timeout = 0");
}

session::unbounded::~unbounded() {
  db_.statement_timeout_lifted_ = false;
  try {
    db_.exec(db_.bounds_statement());
  } catch (const error&) {
    // A new connection sets them again.
  }
}

std::string session::bounds_statement() const {
  auto milliseconds = [](std::chrono::milliseconds value) {
    return "'" + std::to_string(value.count()) + "ms'";
  };
  if (statement_timeout_lifted_) return "SET statement_timeout = 0; SET lock_timeout = 0";
  return "SET statement_timeout = " + milliseconds(limits_.statement_timeout) +
         "; SET lock_timeout = " + milliseconds(limits_.lock_timeout);
}

void session::set_on_connect(std::string statement) {
  exec(statement);
  on_connect_.push_back(std::move(statement));
}

result session::checked(pg_result* handle, std::string_view sql) {
  result out(handle);
  const auto status = handle ? PQresultStatus(handle) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY) {
    return out;
  }
  const char* state = handle ? PQresultErrorField(handle, PG_DIAG_SQLSTATE) : nullptr;
  std::string message =
      handle ? PQresultErrorMessage(handle) : (conn_ ? PQerrorMessage(conn_) : "no connection");
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  const bool lost =
      !conn_ || PQstatus(conn_) != CONNECTION_OK || (state && is_connection_failure(state));
  sql.remove_prefix(std::min(sql.find_first_not_of(" \n"), sql.size()));
  std::string first_line(sql.substr(0, sql.find('\n')));
  if (first_line.size() > 60) first_line = first_line.substr(0, 60) + "…";
  throw error("PostgreSQL: " + message + (state ? std::string(" [SQLSTATE ") + state + "]" : "") +
                  " (in: " + first_line + ")",
              lost ? error::kind::unreachable : kind_of(state ? state : ""));
}

result session::exec(std::string_view sql) {
  flush();
  ensure_connected();
  const std::string text(sql);
  if (PQsendQuery(conn_, text.c_str()) == 0) return checked(nullptr, sql);
  return checked(await_result(sql), sql);
}

result session::exec(const std::string& sql, const params& values) {
  // Alone or after queued statements, it goes in a pipeline: its first use prepares it there.
  return exec_pipelined(&sql, &values);
}

std::string session::name_for(const queued_statement& statement, bool& to_prepare) {
  to_prepare = false;
  if (statement.values.size() == 0) return {};  // BEGIN, COMMIT, SAVEPOINT: nothing to plan
  if (auto found = prepared_.find(statement.sql); found != prepared_.end()) return found->second;
  if (prepared_.size() >= most_prepared) return {};
  to_prepare = true;
  std::string name = "surge_" + std::to_string(++names_given_);
  prepared_.emplace(statement.sql, name);
  return name;
}

int session::server_version() const { return conn_ ? PQserverVersion(conn_) : 0; }

void session::flush() {
  if (!queued_.empty()) exec_pipelined(nullptr, nullptr);
}

bool session::only_begin_queued() const {
  return queued_.size() == 1 && queued_.front().sql.starts_with("BEGIN");
}

void session::send(std::string sql, params values) {
  queued_.push_back({std::move(sql), std::move(values)});
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
  // A transaction's BEGIN may still wait in the queue for its first statement.
  return in_transaction_ || (conn_ && PQtransactionStatus(conn_) == PQTRANS_INTRANS);
}

transaction::transaction(session& db, std::string_view begin) : db_(db) {
  // Connected (again) now, while no transaction is open; the BEGIN itself goes with the
  // transaction's first statement.
  db_.ensure_connected();
  db_.send(std::string(begin));
  db_.in_transaction_ = true;
}

transaction::~transaction() {
  if (open_) roll_back();
}

void transaction::roll_back() {
  db_.queued_.clear();
  db_.in_transaction_ = false;
  // A dropped connection took the transaction with it; connecting again only to roll back
  // would wait on a server that may be silent. A BEGIN still queued never reached the server.
  if (!db_.conn_ || PQstatus(db_.conn_) != CONNECTION_OK) return;
  if (PQtransactionStatus(db_.conn_) == PQTRANS_IDLE) return;
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
    db_.exec(std::string("COMMIT"), params());
  } catch (...) {
    // A queued statement that failed kept the COMMIT from running: the server still holds the
    // aborted transaction.
    if (db_.conn_ && PQtransactionStatus(db_.conn_) != PQTRANS_IDLE) {
      roll_back();
    } else {
      db_.in_transaction_ = false;
    }
    throw;
  }
  db_.in_transaction_ = false;
}

error::kind kind_of(std::string_view sqlstate) {
  // 55P03: lock_timeout or NOWAIT met a lock another session holds.
  if (sqlstate == "55P03") return error::kind::busy;
  // 57014: cancelled, here by a statement timeout (ours or the role's).
  if (sqlstate == "57014") return error::kind::timed_out;
  // 25006: a read-only transaction (default_transaction_read_only, a standby); 42501: the role
  // lacks the privilege.
  if (sqlstate == "25006" || sqlstate == "42501") return error::kind::read_only;
  // 42P01, 42703: a table or column is gone.
  if (sqlstate == "42P01" || sqlstate == "42703") return error::kind::schema_missing;
  // Class 22 (a value out of range or of the wrong form), class 23 (a constraint), P0001 (a
  // trigger's RAISE EXCEPTION): the row's values were refused.
  if (sqlstate.starts_with("22") || sqlstate.starts_with("23") || sqlstate == "P0001") {
    return error::kind::row_rejected;
  }
  return error::kind::other;
}

bool is_connection_failure(std::string_view sqlstate) {
  // Class 08 (connection exception) and 57P01-57P03 (admin shutdown, crash shutdown, cannot
  // connect now): the server went away or is restarting.
  return sqlstate.starts_with("08") || sqlstate == "57P01" || sqlstate == "57P02" ||
         sqlstate == "57P03";
}

}  // namespace surge::storage::pg
