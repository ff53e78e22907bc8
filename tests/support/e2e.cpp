#include "tests/support/e2e.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <regex>

#include <arpa/inet.h>
#include <openssl/evp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include "proto/clock.hpp"
#include "storage/connection.hpp"
#include "storage/sqlite/database.hpp"
#include "storage/sqlite/schema.hpp"
#include "tests/support/shared_ddl.hpp"

namespace surge::testing {

namespace fs = std::filesystem;

std::string surge_binary() {
  // Another build's binary, to see a test fail on the code before a fix.
  if (const char* other = std::getenv("SURGE_TEST_BINARY"); other != nullptr && *other != '\0') {
    return other;
  }
  return SURGE_BINARY_PATH;
}

std::vector<sink_request> read_sink_record(const std::string& path) {
  std::vector<sink_request> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    // CSV as the sink writes it: a field is quoted when it holds a comma or a quote.
    std::vector<std::string> fields(1);
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = !quoted;
      } else if (c == ',' && !quoted) {
        fields.emplace_back();
      } else {
        fields.back() += c;
      }
    }
    if (fields.size() < 8) continue;
    sink_request request;
    request.arrival = std::stod(fields[0]);
    request.subscriber_id = fields[1].empty() ? 0 : std::stoll(fields[1]);
    {
      std::stringstream ids(fields[2]);
      std::int64_t id = 0;
      while (ids >> id) request.batch_ids.push_back(id);
      request.delivery_id = request.batch_ids.empty() ? 0 : request.batch_ids.front();
    }
    request.attempt = fields[3].empty() ? 0 : std::stoi(fields[3]);
    request.verdict = fields[4];
    request.status = std::stoi(fields[5]);
    request.event_type = fields[6];
    request.connection_id = std::stoull(fields[7]);
    if (fields.size() > 8) request.sni = fields[8];
    if (fields.size() > 9) request.body_sha256 = fields[9];
    if (fields.size() > 10) request.batch_size = std::stoi(fields[10]);
    if (request.batch_size == 0) request.batch_ids.clear();
    out.push_back(std::move(request));
  }
  return out;
}

sink_process::sink_process(const temp_dir& dir, const std::string& db_path, options opts) {
  static int counter = 0;
  const std::string tag = "sink" + std::to_string(++counter);
  record_path_ = dir.file(tag + ".csv");
  const std::string port_file = dir.file(tag + ".port");
  const std::string host =
      opts.host.find(':') == std::string::npos ? opts.host : "[" + opts.host + "]";
  const std::string listen = host + ":" + std::to_string(opts.port);
  std::vector<std::string> args{"sink",
                                "--listen",
                                listen,
                                "--db",
                                db_path,
                                "--port-file",
                                port_file,
                                "--record",
                                record_path_,
                                "--threads",
                                std::to_string(opts.threads)};
  if (!opts.behaviours_json.empty()) {
    const std::string behaviours = dir.file(tag + "-behaviours.json");
    std::ofstream(behaviours) << opts.behaviours_json;
    args.insert(args.end(), {"--behaviours", behaviours});
  }
  if (!opts.tls_cert.empty()) {
    args.insert(args.end(), {"--tls-cert", opts.tls_cert, "--tls-key", opts.tls_key});
  }
  if (!opts.tls_max_version.empty()) {
    args.insert(args.end(), {"--tls-max-version", opts.tls_max_version});
  }
  process_.emplace(surge_binary(), args, dir.file(tag + ".out"), dir.file(tag + ".err"));
  const auto port = tools::wait_for_file(port_file, std::chrono::seconds(20));
  if (!port) throw std::runtime_error("surge sink did not start; see " + dir.file(tag + ".err"));
  port_ = static_cast<std::uint16_t>(std::stoi(*port));
}

std::string sink_process::url_for(std::int64_t subscriber_id, bool tls,
                                  const std::string& host) const {
  return std::string(tls ? "https://" : "http://") + host + ":" + std::to_string(port_) + "/hook/" +
         std::to_string(subscriber_id);
}

std::vector<sink_request> sink_process::stop_and_read() {
  if (process_) {
    process_->stop(std::chrono::seconds(10));
    process_.reset();
  }
  return read_sink_record(record_path_);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

run_result run_surge(const temp_dir& dir, const std::vector<std::string>& args,
                     std::chrono::milliseconds timeout) {
  static int counter = 0;
  const std::string tag = "run" + std::to_string(++counter);
  tools::child_process child(surge_binary(), args, dir.file(tag + ".out"), dir.file(tag + ".err"));
  run_result result;
  auto status = child.wait(timeout);
  if (!status) status = child.stop(std::chrono::seconds(5));
  result.exit_code = *status;
  auto slurp = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream content;
    content << in.rdbuf();
    return content.str();
  };
  result.out = slurp(dir.file(tag + ".out"));
  result.err = slurp(dir.file(tag + ".err"));
  return result;
}

namespace {
std::string make_queue(const std::string& location) {
  if (!storage::is_postgres_location(location)) {
    SQLite::Database raw(location, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    raw.exec(shared_ddl);
  }
  storage::connection db({.location = location, .create_if_missing = false});
  // A PostgreSQL database starts empty: migrate creates the shared tables there.
  storage::migrate(db, true);
  return location;
}
}  // namespace

test_queue::test_queue(const temp_dir& dir, const std::string& name)
    : test_queue(at_location{dir.file(name)}) {}

test_queue::test_queue(const at_location& where)
    : path_(make_queue(where.location)),
      sql_(path_),
      connection_(storage::connection_config{.location = path_, .create_if_missing = false}) {}

SQLite::Database& test_queue::db() {
  if (!db_) {
    if (sql_.is_postgres()) throw std::logic_error("test_queue::db() on a PostgreSQL queue");
    db_.emplace(storage::sqlite::open_database({.path = path_, .create_if_missing = false}));
  }
  return *db_;
}

std::int64_t test_queue::add_subscriber(const std::string& url, double rate, std::int64_t burst,
                                        const std::string& signing, const std::string& secret,
                                        const std::string& events) {
  storage::subscriber_row row;
  row.url = url;
  row.rate_per_sec = rate;
  row.burst = burst;
  row.tokens = static_cast<double>(burst);
  row.signing = signing;
  row.secret = secret;
  row.event_types = events;
  return storage::add_subscriber(connection_, row);
}

std::vector<std::int64_t> test_queue::add_rows(std::int64_t subscriber_id, int count,
                                               const std::string& payload,
                                               std::optional<double> created_at) {
  std::vector<std::int64_t> ids;
  const auto now = std::to_string(proto::unix_now());
  const auto created = created_at ? std::to_string(*created_at) : now;
  sql_.begin();
  for (int i = 0; i < count; ++i) {
    const auto inserted = sql_.query(
        "INSERT INTO webhook_delivery (subscriber_id, event_type, payload, next_attempt_at, "
        "created_at) VALUES (?, 'video.trending', ?, ?, ?) RETURNING id",
        {std::to_string(subscriber_id), payload, now, created});
    ids.push_back(std::stoll(*inserted.at(0).at(0)));
  }
  sql_.commit();
  return ids;
}

std::int64_t test_queue::add_subscriber_at(const sink_process& sink, double rate,
                                           std::int64_t burst, const std::string& signing,
                                           const std::string& secret) {
  const auto id = add_subscriber("http://placeholder/", rate, burst, signing, secret);
  set_url(id, sink.url_for(id));
  return id;
}

test_queue::row_state test_queue::row(std::int64_t delivery_id) {
  const auto rows = sql_.query(
      "SELECT status, attempts, locked_until, last_status, last_error FROM webhook_delivery "
      "WHERE id = ?",
      {std::to_string(delivery_id)});
  if (rows.empty()) throw std::runtime_error("no row " + std::to_string(delivery_id));
  const auto& found = rows.front();
  row_state out;
  out.status = found[0].value_or("");
  out.attempts = std::stoll(found[1].value_or("0"));
  out.locked_until = std::stod(found[2].value_or("0"));
  if (found[3]) out.last_status = std::stoi(*found[3]);
  out.last_error = found[4].value_or("");
  return out;
}

void test_queue::set_url(std::int64_t subscriber_id, const std::string& url) {
  sql_.exec("UPDATE webhook_subscriber SET url = ? WHERE id = ?",
            {url, std::to_string(subscriber_id)});
}

std::map<std::string, std::int64_t> test_queue::count_by_status() {
  std::map<std::string, std::int64_t> out;
  for (const auto& found :
       sql_.query("SELECT status, COUNT(*) FROM webhook_delivery GROUP BY status")) {
    out[found[0].value_or("")] = std::stoll(found[1].value_or("0"));
  }
  return out;
}

std::uint16_t unused_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

std::uint16_t metrics_port_from_log(const std::string& log_path) {
  const std::regex announced(R"(metrics on http://[0-9.]+:([0-9]+)/metrics)");
  for (int i = 0; i < 400; ++i) {
    std::ifstream in(log_path);
    std::stringstream content;
    content << in.rdbuf();
    std::smatch match;
    const std::string text = content.str();
    if (std::regex_search(text, match, announced)) {
      return static_cast<std::uint16_t>(std::stoi(match[1]));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return 0;
}

std::string sha256_hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(data.data(), data.size(), digest, &size, EVP_sha256(), nullptr);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < size; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 0xf];
  }
  return out;
}

std::map<std::int64_t, int> deliveries(const std::vector<sink_request>& requests) {
  std::map<std::int64_t, int> out;
  for (const auto& request : requests) {
    if (request.batch_size == 0) {
      ++out[request.delivery_id];
    } else {
      for (const auto id : request.batch_ids) ++out[id];
    }
  }
  return out;
}

int max_in_window(std::vector<double> arrivals, double window) {
  std::sort(arrivals.begin(), arrivals.end());
  int best = 0;
  std::size_t start = 0;
  for (std::size_t end = 0; end < arrivals.size(); ++end) {
    while (arrivals[end] - arrivals[start] >= window) ++start;
    best = std::max(best, static_cast<int>(end - start + 1));
  }
  return best;
}

std::map<std::pair<std::int64_t, int>, double> attempt_starts(test_queue& queue, std::int64_t id) {
  std::map<std::pair<std::int64_t, int>, double> out;
  for (const auto& found :
       queue.sql().query("SELECT delivery_id, attempt, started_at FROM surge_attempt "
                         "WHERE subscriber_id = ?",
                         {std::to_string(id)})) {
    out[{std::stoll(found[0].value_or("0")), std::stoi(found[1].value_or("0"))}] =
        std::stod(found[2].value_or("0"));
  }
  return out;
}

transit transit_spread(const std::vector<sink_request>& requests, std::int64_t id,
                       const std::map<std::pair<std::int64_t, int>, double>& starts) {
  double low = 1e9;
  double high = -1e9;
  std::size_t matched = 0;
  for (const auto& request : requests) {
    if (request.subscriber_id != id) continue;
    const auto start = starts.find({request.delivery_id, request.attempt});
    if (start == starts.end()) continue;
    ++matched;
    low = std::min(low, request.arrival - start->second);
    high = std::max(high, request.arrival - start->second);
  }
  return {high >= low ? high - low : 0.0, matched};
}

}  // namespace surge::testing
