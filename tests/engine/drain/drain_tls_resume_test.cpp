// TLS session resumption, judged by a server Surge did not write: nginx closes every connection
// after one request (keepalive_requests 1), so each delivery needs a new TLS connection, and its
// access log says for each whether the session was resumed ($ssl_session_reused "r"). The
// drain's surge_tls_handshakes_total and exit summary must agree with it.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "tests/support/e2e.hpp"
#include "tests/support/http_get.hpp"
#include "tests/support/nginx.hpp"
#include "tests/support/test_pki.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;

struct tls_variant {
  const char* name;
  const char* protocol;    // nginx ssl_protocols and the $ssl_protocol it logs
  const char* resumption;  // the server's side of it
  bool gives_sessions = true;
};

void PrintTo(const tls_variant& variant, std::ostream* out) { *out << variant.name; }

// TLS 1.3 resumes from tickets sent after the handshake; TLS 1.2 here from session ids the
// server keeps in its cache (tickets off), the two mechanisms a partner may offer; and a
// partner that offers neither.
const tls_variant variants[] = {
    {"Tls13Tickets", "TLSv1.3", "ssl_session_tickets on;"},
    {"Tls12SessionIds", "TLSv1.2", "ssl_session_tickets off; ssl_session_cache shared:resume:1m;"},
    // No resumption at all: new connections must not wait for a session that never comes.
    {"Tls13NoSessions", "TLSv1.3", "ssl_session_tickets off; ssl_session_cache off;", false},
};

std::string nginx_conf(const std::string& root, const test_pki& pki, const tls_variant& tls,
                       std::uint16_t port, std::uint16_t ready_port) {
  std::ostringstream conf;
  conf << nginx_conf_prelude(root)
       << "  log_format resume '$ssl_protocol $ssl_session_reused $connection $status $uri';\n"
       << "  access_log " << root << "/access.log resume;\n"
       << "  keepalive_requests 1;\n"
       << "  server { listen 127.0.0.1:" << ready_port << "; location = /ready { return 204; } }\n"
       << "  server {\n    listen 127.0.0.1:" << port << " ssl;\n"
       << "    ssl_certificate " << pki.server_cert << ";\n"
       << "    ssl_certificate_key " << pki.server_key << ";\n"
       << "    ssl_protocols " << tls.protocol << ";\n    " << tls.resumption << "\n"
       << "    location / { return 204; }\n  }\n}\n";
  return conf.str();
}

struct logged_connection {
  std::string protocol;
  bool resumed = false;
  std::string connection;
  int status = 0;
};

std::vector<logged_connection> read_access_log(const std::string& path) {
  std::vector<logged_connection> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    logged_connection entry;
    std::string reused, uri;
    fields >> entry.protocol >> reused >> entry.connection >> entry.status >> uri;
    if (uri.rfind("/hook/", 0) != 0) continue;
    entry.resumed = reused == "r";
    out.push_back(entry);
  }
  return out;
}

// The value of one sample line `name value` of a Prometheus exposition, or -1.
double sample(const std::string& exposition, const std::string& name) {
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  }
  return -1;
}

// `key=N` from the drain's exit summary line, or -1.
long long summary_field(const std::string& out, const std::string& key) {
  const auto at = out.find(" " + key + "=");
  if (at == std::string::npos) return -1;
  return std::stoll(out.substr(at + key.size() + 2));
}

class DrainTlsResume : public ::testing::TestWithParam<tls_variant> {};

TEST_P(DrainTlsResume, NewConnectionsToAnOriginSeenBeforeResumeItsSession) {
  const auto nginx = nginx_binary();
  if (!nginx) GTEST_SKIP() << "nginx is not installed (Debian package nginx-light)";
  const tls_variant& tls = GetParam();
  temp_dir dir;
  std::filesystem::create_directories(dir.file("nginx"));
  std::filesystem::create_directories(dir.file("pki"));
  const auto pki = make_test_pki(dir.file("pki"));
  const auto port = unused_port();
  const auto ready_port = unused_port();
  std::ofstream(dir.file("nginx/nginx.conf"))
      << nginx_conf(dir.file("nginx"), pki, tls, port, ready_port);
  auto server = start_nginx(*nginx, dir.file("nginx"), ready_port);

  constexpr int rows = 200;
  test_queue queue(dir);
  const auto id =
      queue.add_subscriber("https://localhost:" + std::to_string(port) + "/hook/1", 100000, 100000);
  queue.add_rows(id, rows);

  // Not --until-drained: /metrics is read once every row is done, while the drain still runs.
  const auto metrics_port = unused_port();
  tools::child_process drain(
      surge_binary(),
      {"drain", "--db", queue.path(), "--allow-private-targets", "--ca-file", pki.ca_cert,
       "--metrics-listen", "127.0.0.1:" + std::to_string(metrics_port), "--progress", "off"},
      dir.file("drain.out"), dir.file("drain.err"));
  for (int i = 0; i < 1200 && queue.count_by_status()["done"] < rows; ++i) {
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(queue.count_by_status()["done"], rows);
  const auto metrics = http_get(metrics_port, "/metrics");
  ASSERT_EQ(drain.stop(10s), 0);
  server.stop();
  ASSERT_EQ(metrics.status, 200);

  const auto log = read_access_log(dir.file("nginx/access.log"));
  ASSERT_EQ(static_cast<int>(log.size()), rows);
  std::set<std::string> connections;
  int resumed = 0;
  for (const auto& entry : log) {
    EXPECT_EQ(entry.protocol, tls.protocol);
    EXPECT_EQ(entry.status, 204);
    connections.insert(entry.connection);
    if (entry.resumed) ++resumed;
  }
  // Every delivery had a connection of its own: rows handshakes in all.
  ASSERT_EQ(static_cast<int>(connections.size()), rows);
  const int full = rows - resumed;
  // The subscriber's first 16 requests (its in-flight cap) open connections at once: one does
  // the full handshake and the others wait for the session it brings, then resume
  // (engine/net/handshake_gate.hpp); later ones find sessions there (the last TLS 1.3 ticket is
  // offered as a copy rather than running out). So one full handshake in all: 16 without the
  // wait, every one without resumption.
  if (tls.gives_sessions) {
    EXPECT_EQ(full, 1) << resumed << " of " << rows << " connections resumed";
  } else {
    EXPECT_EQ(resumed, 0);
  }

  // The drain counted the same handshakes, in /metrics and in its exit summary.
  EXPECT_EQ(sample(metrics.body, "surge_tls_handshakes_total{resumed=\"true\"}"), resumed);
  EXPECT_EQ(sample(metrics.body, "surge_tls_handshakes_total{resumed=\"false\"}"), full);
  std::ifstream out_file(dir.file("drain.out"));
  const std::string out((std::istreambuf_iterator<char>(out_file)), {});
  EXPECT_EQ(summary_field(out, "tls_resumed"), resumed) << out;
  EXPECT_EQ(summary_field(out, "tls_full"), full) << out;
}

INSTANTIATE_TEST_SUITE_P(Nginx, DrainTlsResume, ::testing::ValuesIn(variants),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace surge::testing
