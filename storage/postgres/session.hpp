#pragma once
// One libpq connection and the few things the PostgreSQL queue does with it: run a statement
// with text parameters, read text results, hold a transaction. Private to storage/.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "storage/database.hpp"
#include "storage/error.hpp"
#include "storage/postgres/values.hpp"

struct pg_conn;

namespace surge::storage::pg {

// What bounds every call of a session, so that a server that is silent (stopped, a port that
// accepts and never answers), a lock another session holds or a role's own timeout can never
// hold a caller for ever (docs/operations.md, "PostgreSQL timeouts").
struct session_limits {
  // Connecting, startup and authentication included; a `connect_timeout` in the URI wins.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  // The session's own statement_timeout (SET at every connect, overriding the role's); 0: none.
  std::chrono::milliseconds statement_timeout{std::chrono::seconds(30)};
  // The session's lock_timeout: how long a statement waits for a lock that SKIP LOCKED does not
  // step around (a table lock, an ownership row); 0: none.
  std::chrono::milliseconds lock_timeout{std::chrono::seconds(2)};
  // How much longer than statement_timeout the client waits for an answer before it drops the
  // connection: the server enforces its timeout only while it runs.
  std::chrono::milliseconds silence_margin{std::chrono::seconds(5)};
  // A stop past its grace period: waits end at once (the connection is dropped). Must outlive
  // the session.
  const interruptible_wait* interrupt = nullptr;
};

class session {
 public:
  // `uri`: a libpq connection URI. Throws storage::error (kind unreachable) when the server
  // cannot be reached, refuses, or does not answer within the connect timeout.
  explicit session(std::string uri, session_limits limits = {});
  ~session();
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  // Runs one statement; throws storage::error naming the SQLSTATE on failure. A connection
  // found broken is re-established once first, so a restarted server costs one failed call.
  // `sql` without parameters may hold several statements; statements queued by send() go first,
  // in a round trip of their own.
  result exec(std::string_view sql);
  // Statements queued by send() go in the same round trip, before this one (libpq's pipeline
  // mode): the first of them to fail is what throws.
  result exec(const std::string& sql, const params& values);

  // Queues one statement whose result the caller does not read (a BEGIN, a SAVEPOINT, an INSERT
  // of records): it reaches the server with the next exec, so a transaction's cycle waits for one
  // round trip where it would wait for several. A transaction that rolls back first discards it.
  void send(std::string sql, params values = {});
  // Sends what is queued now, in a round trip of its own.
  void flush();
  // Whether the queue holds a transaction's BEGIN and nothing else (a statement of its own
  // that fails would otherwise be taken for the next exec's failure).
  bool only_begin_queued() const;

  // A setting for this session (`SET …`), made now and again on every new connection.
  void set_on_connect(std::string statement);

  // Lifts the statement and lock timeouts (and the client's wait for an answer) while it lives:
  // for schema changes, which may build an index over a large table or wait for another
  // process's migration.
  class unbounded {
   public:
    explicit unbounded(session& db);
    ~unbounded();
    unbounded(const unbounded&) = delete;
    unbounded& operator=(const unbounded&) = delete;

   private:
    session& db_;
  };

  // Notifications received on channels this session listens on, since the last call.
  std::vector<std::string> take_notifications();

  bool in_transaction() const;
  // Connections made so far: it grows when a lost connection was re-established, and with it
  // what the session had set up (LISTEN) is gone.
  std::int64_t connections() const { return connections_; }
  const std::string& uri() const { return uri_; }
  // The server's version as libpq gives it (150004 for 15.4); 0 while not connected.
  int server_version() const;

 private:
  friend class transaction;
  void ensure_connected();
  void connect();
  // Waits until the connection's socket is ready for `events` (poll(2) flags) or the deadline
  // passes; throws storage::error (unreachable) and drops the connection on a timeout or an
  // interrupt.
  void wait_socket(short events, std::chrono::steady_clock::time_point deadline,
                   std::string_view what);
  // Sends what PQsendQuery* queued and collects its results: the first failed one, else the
  // last, as PQexec would, but never waiting past the session's limits.
  pg_result* await_result(std::string_view sql);
  // The pieces of await_result: false when the connection broke while sending.
  bool flush_output(std::chrono::steady_clock::time_point deadline, const std::string& what);
  // The results of the next statement sent, up to libpq's end marker: nullptr when the
  // connection broke.
  pg_result* collect_results(std::chrono::steady_clock::time_point deadline,
                             const std::string& what);
  // The queued statements and then `sql` (none when null) in one pipeline and one sync.
  result exec_pipelined(const std::string* sql, const params* values);
  void drop_connection();
  // How long the client waits for the answers of `statements` statements sent together.
  std::chrono::steady_clock::time_point answer_deadline(int statements = 1) const;
  // The SET statements that put the session's limits in force.
  std::string bounds_statement() const;
  result checked(pg_result* handle, std::string_view sql);

  std::string uri_;
  session_limits limits_;
  bool statement_timeout_lifted_ = false;
  pg_conn* conn_ = nullptr;
  // Inside a transaction a lost connection is never re-established: the statements after it
  // would run outside the transaction.
  bool in_transaction_ = false;
  std::int64_t connections_ = 0;
  std::vector<std::string> on_connect_;
  struct queued_statement {
    std::string sql;
    params values;
  };
  std::vector<queued_statement> queued_;
  // Statements with parameters are prepared on the connection the first time they are sent, so
  // a cycle's claim, outcome and attempt statements are parsed and planned once per connection
  // instead of on every call (docs/benchmarks.md, "Several drains on one PostgreSQL"). The text
  // names the statement; past `most_prepared` texts, the rest are sent unnamed.
  static constexpr std::size_t most_prepared = 64;
  std::unordered_map<std::string, std::string> prepared_;  // text -> name, on this connection
  std::int64_t names_given_ = 0;
  // The name `statement` goes by, prepared or to be prepared in this pipeline; empty: unnamed.
  std::string name_for(const queued_statement& statement, bool& to_prepare);
};

// BEGIN … COMMIT, rolled back when left without commit (exceptions included).
class transaction {
 public:
  // `begin`: one statement (it is queued, and queued statements go one by one).
  explicit transaction(session& db, std::string_view begin = "BEGIN");
  ~transaction();
  transaction(const transaction&) = delete;
  transaction& operator=(const transaction&) = delete;
  void commit();

 private:
  void roll_back();

  session& db_;
  bool open_ = true;
};

// The statements' names for the queue's SQLSTATE classes worth telling apart.
bool is_connection_failure(std::string_view sqlstate);
// What a failed statement's SQLSTATE means to the drain (a connection failure aside).
error::kind kind_of(std::string_view sqlstate);

}  // namespace surge::storage::pg
