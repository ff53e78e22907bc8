#pragma once
// End-to-end test support: a temp directory with a real queue file, the real `surge sink` and
// `surge drain` processes on loopback, and the sink's request record.
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <SQLiteCpp/Database.h>

#include "storage/connection.hpp"
#include "storage/sqlite/subscribers.hpp"
#include "tests/support/sql_client.hpp"
#include "tests/support/temp_dir.hpp"
#include "tools/process.hpp"

namespace surge::testing {

// The `surge` binary under test (set by CMake; $SURGE_TEST_BINARY names another build's).
std::string surge_binary();

struct sink_request {
  double arrival = 0;
  std::int64_t subscriber_id = 0;
  std::int64_t delivery_id = 0;
  int attempt = 0;
  std::string verdict;
  int status = 0;
  std::string event_type;
  std::uint64_t connection_id = 0;
  std::string sni;          // the TLS server name the client sent; empty for plain HTTP
  std::string body_sha256;  // lowercase hex SHA-256 of the body the sink received
  // A batch POST: how many events its headers announced (0 for a single row) and its rows in
  // body order; `delivery_id` is then the first of them.
  int batch_size = 0;
  std::vector<std::int64_t> batch_ids;
};

std::vector<sink_request> read_sink_record(const std::string& path);

class sink_process {
 public:
  struct options {
    std::string behaviours_json;  // empty: every request gets 200
    std::string tls_cert, tls_key;
    std::string tls_max_version;  // --tls-max-version; empty: the sink's default
    int threads = 1;
    std::uint16_t port = 0;          // 0: any free port
    std::string host = "127.0.0.1";  // where to listen: a loopback address, "::1" for IPv6
  };
  sink_process(const temp_dir& dir, const std::string& db_path, options opts);
  sink_process(const temp_dir& dir, const std::string& db_path)
      : sink_process(dir, db_path, options{}) {}

  std::uint16_t port() const { return port_; }
  const std::string& record_path() const { return record_path_; }
  std::string url_for(std::int64_t subscriber_id, bool tls = false,
                      const std::string& host = "127.0.0.1") const;
  // Stops the sink (SIGTERM) and returns every request it recorded.
  std::vector<sink_request> stop_and_read();

 private:
  std::string record_path_;
  std::optional<tools::child_process> process_;
  std::uint16_t port_ = 0;
};

struct run_result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `surge ARGS...` to completion (killed after `timeout`).
run_result run_surge(const temp_dir& dir, const std::vector<std::string>& args,
                     std::chrono::milliseconds timeout = std::chrono::seconds(120));

// A queue made by the shared DDL and migrated, with helpers to fill it: a file in the test's
// directory, or a PostgreSQL database (tests/support/postgres_server.hpp).
class test_queue {
 public:
  explicit test_queue(const temp_dir& dir, const std::string& name = "queue.db");
  struct at_location {
    std::string location;  // a file path or a postgresql:// URI
  };
  explicit test_queue(const at_location& where);
  // What --db names: the file's path or the URI.
  const std::string& path() const { return path_; }
  // The file's own connection; throws std::logic_error on a PostgreSQL queue.
  SQLite::Database& db();
  // Raw SQL with `?` placeholders on either kind of queue.
  sql_client& sql() { return sql_; }
  storage::connection& connection() { return connection_; }

  std::int64_t add_subscriber(const std::string& url, double rate, std::int64_t burst,
                              const std::string& signing = "vvv",
                              const std::string& secret = "test-secret",
                              const std::string& events = "*");
  // Inserts `count` pending rows for one subscriber, due now (or at `due`).
  std::vector<std::int64_t> add_rows(std::int64_t subscriber_id, int count,
                                     const std::string& payload = R"({"video":"v1"})",
                                     std::optional<double> created_at = std::nullopt);

  struct row_state {
    std::string status;
    std::int64_t attempts = 0;
    double locked_until = 0;
    std::optional<int> last_status;
    std::string last_error;
  };
  row_state row(std::int64_t delivery_id);
  std::map<std::string, std::int64_t> count_by_status();
  // Points a subscriber at `url` with raw SQL (add_subscriber validates URLs; tests of bad or
  // hostile URLs need to store them as a producer could).
  void set_url(std::int64_t subscriber_id, const std::string& url);
  // A subscriber whose URL is the sink's /hook/<its id>.
  std::int64_t add_subscriber_at(const sink_process& sink, double rate, std::int64_t burst,
                                 const std::string& signing = "vvv",
                                 const std::string& secret = "test-secret");

 private:
  std::string path_;
  sql_client sql_;
  storage::connection connection_;
  std::optional<SQLite::Database> db_;
};

// A loopback port nothing listens on right now (bound and released).
std::uint16_t unused_port();

// The port a `surge drain --metrics-listen HOST:0` announced in its log (waits up to 10 s);
// 0 if it never did.
std::uint16_t metrics_port_from_log(const std::string& log_path);

// Lowercase hex SHA-256, to compare with the sink record's body_sha256.
std::string sha256_hex(const std::string& data);

// Requests per delivery id (each row of a batch counts once for its request).
std::map<std::int64_t, int> deliveries(const std::vector<sink_request>& requests);

// When Surge started each attempt of subscriber `id`, keyed by (delivery id, attempt), from its
// audit table: the send side of what the receiver saw, free of the transport's latency spread.
std::map<std::pair<std::int64_t, int>, double> attempt_starts(test_queue& queue, std::int64_t id);

// How much the transport stretched the schedule: the spread of (arrival - send start) over the
// subscriber's requests. Requests sent within a window of w arrive within one of w + spread, so
// a receiver-side window may hold what a send-side window of that length allows. Milliseconds in
// a normal build; sanitizer builds make bursts on new connections arrive late and bunched.
struct transit {
  double spread = 0;
  std::size_t matched = 0;  // requests whose start was found
};
transit transit_spread(const std::vector<sink_request>& requests, std::int64_t id,
                       const std::map<std::pair<std::int64_t, int>, double>& starts);

// A file's whole text ("" when it cannot be read): a process's output, a page the browser wrote.
std::string read_file(const std::string& path);

// Largest count of requests to one subscriber within any window of `window` seconds.
int max_in_window(std::vector<double> arrivals, double window);

// Checks `done` every `step` until it holds or `limit` passes; its last answer. For what a drain
// does in its own time: a loaded machine (a sanitizer suite at -j2) may start it late, so tests
// wait for the state they check rather than sleep a fixed time.
template <class Condition>
bool eventually(Condition done, std::chrono::milliseconds limit,
                std::chrono::milliseconds step = std::chrono::milliseconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(step);
  }
  return done();
}

}  // namespace surge::testing
