// surge_seed_loop: the naive drain loop the benchmarks compare Surge against (the seed Go
// drain loop: sequential, 200 rows per poll), as a C++ stand-in so both are measured on the same
// machine in the same run. It claims with the steady-state drainer's own SQL, POSTs each row in
// turn (the same request bytes as Surge: engine::write_delivery_request) over one keep-alive
// connection per origin, then writes the batch's outcomes in one transaction. It records every
// attempt in surge_attempt so bench/e2e.py analyses it exactly as it analyses a Surge drain.
// Plain HTTP; a failed attempt is retried 60 s later. Exits when a claim comes back empty.
//
//   surge_seed_loop --db PATH [--batch 200]
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/asio/write.hpp>

#include "engine/config.hpp"
#include "engine/shard/delivery.hpp"
#include "proto/clock.hpp"
#include "proto/signing.hpp"
#include "proto/target_policy.hpp"
#include "storage/sqlite/database.hpp"
#include "tests/storage/sqlite/other_drainer_sql.hpp"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace sql = surge::other_drainer_sql;
using surge::proto::unix_now;

struct endpoint {
  surge::proto::target target;
  std::optional<surge::proto::signer> signer;
};

class seed_loop {
 public:
  seed_loop(const std::string& db_path, int batch)
      : db_(surge::storage::sqlite::open_database({.path = db_path, .create_if_missing = false})),
        batch_(batch) {}

  // Rows sent in one poll; 0 when nothing was due.
  int poll() {
    const double now = unix_now();
    const double lease = now + 30;
    {
      SQLite::Transaction transaction(db_, SQLite::TransactionBehavior::IMMEDIATE);
      SQLite::Statement claim(db_, sql::claim());
      claim.bind(1, lease);
      claim.bind(2, now);
      claim.bind(3, now);
      claim.bind(4, batch_);
      claim.exec();
      transaction.commit();
    }
    std::vector<surge::storage::claimed_row> rows;
    SQLite::Statement read(db_, sql::read_back);
    read.bind(1, lease);
    while (read.executeStep()) {
      auto& row = rows.emplace_back();
      row.id = read.getColumn(0).getInt64();
      row.subscriber_id = read.getColumn(1).getInt64();
      row.event_type = read.getColumn(2).getString();
      row.payload = read.getColumn(3).getString();
      row.attempts = read.getColumn(4).getInt64();
    }
    std::vector<attempt> attempts;
    for (const auto& row : rows) attempts.push_back(send(row));
    record(attempts);
    return static_cast<int>(rows.size());
  }

 private:
  struct attempt {
    std::int64_t delivery_id, subscriber_id, number;
    double started, finished;
    int status;
  };

  const endpoint& endpoint_of(std::int64_t subscriber_id) {
    auto& slot = endpoints_[subscriber_id];
    if (!slot) {
      SQLite::Statement query(db_,
                              "SELECT url, secret, signing FROM webhook_subscriber WHERE id = ?");
      query.bind(1, subscriber_id);
      if (!query.executeStep()) throw std::runtime_error("unknown subscriber");
      auto parsed = surge::proto::parse_target_url(query.getColumn(0).getString());
      if (!parsed.value || parsed.value->tls) throw std::runtime_error("need a plain http URL");
      const auto scheme = surge::proto::parse_signing_scheme(query.getColumn(2).getString());
      slot = std::make_unique<endpoint>(
          endpoint{*parsed.value,
                   surge::proto::signer::create(scheme.value_or(surge::proto::signing_scheme::vvv),
                                                query.getColumn(1).getString())});
      if (!slot->signer) throw std::runtime_error("unusable secret");
    }
    return *slot;
  }

  beast::tcp_stream& connection_to(const surge::proto::target& target) {
    auto& slot = connections_[target.origin_key];
    if (!slot) {
      slot = std::make_unique<beast::tcp_stream>(io_);
      asio::ip::tcp::resolver resolver(io_);
      slot->connect(resolver.resolve(target.host, std::to_string(target.port)));
    }
    return *slot;
  }

  attempt send(const surge::storage::claimed_row& row) {
    const auto& to = endpoint_of(row.subscriber_id);
    attempt out{row.id, row.subscriber_id, row.attempts + 1, unix_now(), 0, 0};
    std::string request;
    surge::engine::write_delivery_request(
        request,
        surge::engine::request_head(to.target, surge::engine::http_client_config{}.user_agent),
        *to.signer, row, static_cast<std::int64_t>(out.started));
    // One retry on a fresh connection, as any keep-alive client does for a stale one.
    for (int tries = 0; tries < 2 && out.status == 0; ++tries) {
      try {
        auto& stream = connection_to(to.target);
        asio::write(stream, asio::buffer(request));
        beast::flat_buffer buffer;
        http::response<http::string_body> response;
        http::read(stream, buffer, response);
        out.status = static_cast<int>(response.result_int());
        if (!response.keep_alive()) connections_.erase(to.target.origin_key);
      } catch (const std::exception&) {
        connections_.erase(to.target.origin_key);
      }
    }
    out.finished = unix_now();
    return out;
  }

  void record(const std::vector<attempt>& attempts) {
    SQLite::Transaction transaction(db_, SQLite::TransactionBehavior::IMMEDIATE);
    SQLite::Statement done(db_, sql::mark_done);
    SQLite::Statement retry(db_, sql::mark_retry);
    SQLite::Statement audit(db_,
                            "INSERT INTO surge_attempt (delivery_id, subscriber_id, attempt, "
                            "started_at, finished_at, status_code) VALUES (?, ?, ?, ?, ?, ?)");
    for (const auto& a : attempts) {
      if (a.status >= 200 && a.status < 300) {
        done.bind(1, a.delivery_id);
        done.exec();
        done.reset();
      } else {
        retry.bind(1, a.finished + 60);
        retry.bind(2, a.delivery_id);
        retry.exec();
        retry.reset();
      }
      audit.bind(1, a.delivery_id);
      audit.bind(2, a.subscriber_id);
      audit.bind(3, a.number);
      audit.bind(4, a.started);
      audit.bind(5, a.finished);
      if (a.status)
        audit.bind(6, a.status);
      else
        audit.bind(6);
      audit.exec();
      audit.reset();
    }
    transaction.commit();
  }

  SQLite::Database db_;
  int batch_;
  asio::io_context io_;
  std::map<std::int64_t, std::unique_ptr<endpoint>> endpoints_;
  std::map<std::string, std::unique_ptr<beast::tcp_stream>> connections_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string db;
  int batch = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--db") {
      db = argv[i + 1];
    } else if (flag == "--batch") {
      batch = std::atoi(argv[i + 1]);
    } else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }
  if (db.empty() || batch < 1) {
    std::cerr << "usage: surge_seed_loop --db PATH [--batch 200]\n";
    return 2;
  }
  try {
    seed_loop loop(db, batch);
    long long sent = 0;
    while (const int n = loop.poll()) sent += n;
    std::cout << "summary: sent=" << sent << "\n";
  } catch (const std::exception& error) {
    std::cerr << "surge_seed_loop: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
