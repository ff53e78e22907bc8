// What partners behind a gateway require besides the signature, judged by a server Surge did not
// write: nginx refusing requests without the right Authorization header, and nginx with
// ssl_verify_client on, which lets through only connections presenting a certificate from the
// test CA. Everything is set through the real `surge subscriber set`, as an operator would.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/e2e.hpp"
#include "tests/support/nginx.hpp"
#include "tests/support/test_pki.hpp"

namespace surge::testing {
namespace {

std::vector<std::string> drain_args(const test_queue& queue) {
  return {"drain",
          "--db",
          queue.path(),
          "--until-drained",
          "--allow-private-targets",
          "--progress-interval",
          "0",
          "--threads",
          "2",
          "--max-attempts",
          "1"};
}

void surge_ok(const temp_dir& dir, const std::vector<std::string>& args) {
  const auto result = run_surge(dir, args);
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
}

struct nginx_peer {
  std::uint16_t port = 0;
  std::optional<tools::child_process> process;
};

// nginx with `server_block` listening on a fresh port (written in for PORT).
nginx_peer start_peer(const temp_dir& dir, const std::string& server_block) {
  nginx_peer peer;
  const auto nginx = nginx_binary();
  if (!nginx) return peer;
  std::filesystem::create_directories(dir.file("nginx"));
  peer.port = unused_port();
  const auto ready_port = unused_port();
  std::string block = server_block;
  block.replace(block.find("PORT"), 4, std::to_string(peer.port));
  std::ofstream(dir.file("nginx/nginx.conf"))
      << nginx_conf_prelude(dir.file("nginx")) << "  access_log " << dir.file("nginx")
      << "/access.log;\n"
      << "  server { listen 127.0.0.1:" << ready_port << "; location = /ready { return 204; } }\n"
      << block << "}\n";
  peer.process.emplace(start_nginx(*nginx, dir.file("nginx"), ready_port));
  return peer;
}

TEST(DrainCredentials, AnExtraHeaderGetsThroughAGatewayThatRequiresItAndIsNeverListed) {
  temp_dir dir;
  auto peer =
      start_peer(dir,
                 "  server {\n    listen 127.0.0.1:PORT;\n"
                 "    location / {\n"
                 "      if ($http_authorization != \"Bearer s3cret-token\") { return 401; }\n"
                 "      return 204;\n    }\n  }\n");
  if (!peer.process) GTEST_SKIP() << "nginx is not installed (apt-get install nginx-light)";
  test_queue queue(dir);
  const std::string url = "http://127.0.0.1:" + std::to_string(peer.port) + "/hook";
  const auto with = queue.add_subscriber(url, 1000, 100);
  const auto without = queue.add_subscriber(url, 1000, 100);
  surge_ok(dir, {"subscriber", "set", "--db", queue.path(), std::to_string(with), "--header",
                 "Authorization: Bearer s3cret-token", "--header", "X-Api-Key: k-42"});
  const auto with_rows = queue.add_rows(with, 20);
  const auto without_rows = queue.add_rows(without, 5);

  const auto result = run_surge(dir, drain_args(queue));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (const auto id : with_rows) {
    EXPECT_EQ(queue.row(id).status, "done") << "row " << id << ": " << queue.row(id).last_error;
    EXPECT_EQ(queue.row(id).last_status, 204);
  }
  for (const auto id : without_rows) {
    EXPECT_EQ(queue.row(id).status, "dead") << "row " << id;
    EXPECT_EQ(queue.row(id).last_status, 401);
  }

  // Names shown, values never: listings end up in tickets and terminals.
  for (const std::vector<std::string>& listing :
       {std::vector<std::string>{"subscriber", "list", "--db", queue.path()},
        std::vector<std::string>{"subscriber", "list", "--db", queue.path(), "--json"},
        std::vector<std::string>{"stats", "--db", queue.path()},
        std::vector<std::string>{"stats", "--db", queue.path(), "--json"}}) {
    const auto shown = run_surge(dir, listing);
    ASSERT_EQ(shown.exit_code, 0) << shown.err;
    EXPECT_NE(shown.out.find("Authorization"), std::string::npos) << listing[0] << "\n"
                                                                  << shown.out;
    EXPECT_NE(shown.out.find("X-Api-Key"), std::string::npos) << shown.out;
    EXPECT_EQ(shown.out.find("s3cret-token"), std::string::npos) << shown.out;
    EXPECT_EQ(shown.out.find("k-42"), std::string::npos) << shown.out;
  }

  // Taken off again: the next drain sends without it and the gateway refuses.
  surge_ok(dir, {"subscriber", "set", "--db", queue.path(), std::to_string(with), "--remove-header",
                 "authorization"});
  const auto later = queue.add_rows(with, 1);
  ASSERT_EQ(run_surge(dir, drain_args(queue)).exit_code, 0);
  EXPECT_EQ(queue.row(later.front()).last_status, 401);
}

TEST(DrainCredentials, HeadersThatWouldOverrideSurgesOwnOrCarryCrLfAreRefusedWithExit2) {
  temp_dir dir;
  test_queue queue(dir);
  const auto id = std::to_string(queue.add_subscriber("http://127.0.0.1:9/hook", 10, 10));
  for (const char* bad :
       {"Host: evil.example", "content-type: text/plain", "X-VVV-Signature: sha256=00",
        "webhook-signature: v1,x", "Transfer-Encoding: chunked", "Bad Name: x", "no colon"}) {
    const auto result =
        run_surge(dir, {"subscriber", "set", "--db", queue.path(), id, "--header", bad});
    EXPECT_EQ(result.exit_code, 2) << bad;
    EXPECT_NE(result.err.find("--header"), std::string::npos) << result.err;
  }
  const auto crlf = run_surge(dir, {"subscriber", "set", "--db", queue.path(), id, "--header",
                                    "Authorization: Bearer x\r\nHost: evil"});
  EXPECT_EQ(crlf.exit_code, 2);
  EXPECT_NE(crlf.err.find("CR/LF"), std::string::npos) << crlf.err;
  // A refusal names the header and the problem, never the value: it is a credential, and usage
  // errors end up in terminals and tickets.
  for (const char* bad : {"Authorization: Bearer s3cret-token\x01",
                          "Content-Encoding: s3cret-token", "Bearer s3cret-token"}) {
    const auto refused =
        run_surge(dir, {"subscriber", "set", "--db", queue.path(), id, "--header", bad});
    EXPECT_EQ(refused.exit_code, 2) << bad;
    EXPECT_NE(refused.err.find("--header"), std::string::npos) << refused.err;
    EXPECT_EQ(refused.err.find("s3cret-token"), std::string::npos) << refused.err;
    EXPECT_EQ(refused.out.find("s3cret-token"), std::string::npos) << refused.out;
  }
  const auto named = run_surge(
      dir, {"subscriber", "set", "--db", queue.path(), id, "--header", "Content-Encoding: gzip"});
  EXPECT_EQ(named.exit_code, 2);
  EXPECT_NE(named.err.find("header 'Content-Encoding'"), std::string::npos) << named.err;
  const auto listed = run_surge(dir, {"subscriber", "list", "--db", queue.path(), "--json"});
  EXPECT_NE(listed.out.find("\"headers\":[]"), std::string::npos) << listed.out;
}

// nginx verifying client certificates against the test CA, on one origin for every subscriber:
// connections and TLS sessions must be kept apart by certificate, or the subscriber without one
// would ride on a connection (or resume a session) of the one with it.
std::string mtls_server(const test_pki& pki) {
  return "  server {\n    listen 127.0.0.1:PORT ssl;\n"
         "    ssl_certificate " +
         pki.server_cert +
         ";\n"
         "    ssl_certificate_key " +
         pki.server_key +
         ";\n"
         "    ssl_client_certificate " +
         pki.ca_cert +
         ";\n"
         "    ssl_verify_client on;\n"
         "    ssl_session_tickets on;\n"
         "    location / { return 204; }\n  }\n";
}

TEST(DrainCredentials, MutualTlsLetsThroughOnlyTheSubscriberWithTheCaSignedCertificate) {
  temp_dir dir;
  std::filesystem::create_directories(dir.file("pki"));
  const auto pki = make_test_pki(dir.file("pki"));
  const auto client = make_client_cert(dir.file("pki"), pki, "partner-client");
  const auto stranger = make_self_signed_cert(dir.file("pki"));
  auto peer = start_peer(dir, mtls_server(pki));
  if (!peer.process) GTEST_SKIP() << "nginx is not installed (apt-get install nginx-light)";

  test_queue queue(dir);
  const std::string url = "https://localhost:" + std::to_string(peer.port) + "/hook";
  const auto with = queue.add_subscriber(url, 1000, 100);
  const auto without = queue.add_subscriber(url, 1000, 100);
  const auto wrong = queue.add_subscriber(url, 1000, 100);
  surge_ok(dir, {"subscriber", "set", "--db", queue.path(), std::to_string(with), "--client-cert",
                 client.cert, "--client-key", client.key});
  surge_ok(dir, {"subscriber", "set", "--db", queue.path(), std::to_string(wrong), "--client-cert",
                 stranger.cert, "--client-key", stranger.key});
  // Interleaved, as a producer fans out: the three share the origin from the first request on.
  std::vector<std::int64_t> with_rows, without_rows, wrong_rows;
  for (int i = 0; i < 15; ++i) {
    with_rows.push_back(queue.add_rows(with, 1).front());
    without_rows.push_back(queue.add_rows(without, 1).front());
    wrong_rows.push_back(queue.add_rows(wrong, 1).front());
  }

  auto args = drain_args(queue);
  args.insert(args.end(), {"--ca-file", pki.ca_cert});
  const auto result = run_surge(dir, args);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (const auto id : with_rows) {
    EXPECT_EQ(queue.row(id).status, "done") << "row " << id << ": " << queue.row(id).last_error;
    EXPECT_EQ(queue.row(id).last_status, 204);
  }
  // nginx answers a connection without a certificate, or with one it cannot verify, with 400
  // after the handshake (TLS 1.3 asks for the certificate after it); no request gets a 2xx.
  for (const auto& [rows, what] : {std::pair{without_rows, "no certificate"},
                                   std::pair{wrong_rows, "a certificate of another CA"}}) {
    for (const auto id : rows) {
      const auto row = queue.row(id);
      EXPECT_EQ(row.status, "dead") << what << ", row " << id;
      EXPECT_EQ(row.last_status, 400) << what << ", row " << id << ": " << row.last_error;
    }
  }

  const auto listed = run_surge(dir, {"subscriber", "list", "--db", queue.path()});
  EXPECT_NE(listed.out.find("client cert " + client.cert), std::string::npos) << listed.out;
}

TEST(DrainCredentials, AnUnusableKeyHoldsThatSubscriberWithAClearErrorWhileOthersAreDelivered) {
  temp_dir dir;
  std::filesystem::create_directories(dir.file("pki"));
  const auto pki = make_test_pki(dir.file("pki"));
  const auto client = make_client_cert(dir.file("pki"), pki, "partner-client");
  const auto other = make_client_cert(dir.file("pki"), pki, "other-client");
  auto peer = start_peer(dir, mtls_server(pki));
  if (!peer.process) GTEST_SKIP() << "nginx is not installed (apt-get install nginx-light)";

  test_queue queue(dir);
  const std::string url = "https://localhost:" + std::to_string(peer.port) + "/hook";
  const auto good = queue.add_subscriber(url, 1000, 100);
  const auto mismatched = queue.add_subscriber(url, 1000, 100);
  const auto missing = queue.add_subscriber(url, 1000, 100);

  // The command refuses a key that does not belong to the certificate, naming the flags.
  const auto refused =
      run_surge(dir, {"subscriber", "set", "--db", queue.path(), std::to_string(mismatched),
                      "--client-cert", client.cert, "--client-key", other.key});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("--client-key"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("does not match"), std::string::npos) << refused.err;

  // Files change after they were set: a key replaced by another one, a key deleted.
  const auto copy = [&](const std::string& from, const std::string& to) {
    std::filesystem::copy_file(from, dir.file(to));
    return dir.file(to);
  };
  const auto mismatched_key = copy(client.key, "mismatched.key");
  const auto missing_key = copy(client.key, "missing.key");
  surge_ok(dir, {"subscriber", "set", "--db", queue.path(), std::to_string(good), "--client-cert",
                 client.cert, "--client-key", client.key});
  surge_ok(dir, {"subscriber", "set", "--db", queue.path(), std::to_string(mismatched),
                 "--client-cert", client.cert, "--client-key", mismatched_key});
  surge_ok(dir, {"subscriber", "set", "--db", queue.path(), std::to_string(missing),
                 "--client-cert", client.cert, "--client-key", missing_key});
  std::filesystem::copy_file(other.key, mismatched_key,
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::remove(missing_key);

  const auto good_rows = queue.add_rows(good, 10);
  const auto mismatched_rows = queue.add_rows(mismatched, 3);
  const auto missing_rows = queue.add_rows(missing, 3);
  auto args = drain_args(queue);
  args.insert(args.end(), {"--ca-file", pki.ca_cert});
  const auto result = run_surge(dir, args);
  // Drained except the rows of the subscribers held for their credentials.
  ASSERT_EQ(result.exit_code, 5) << result.err;
  for (const auto id : good_rows) {
    EXPECT_EQ(queue.row(id).status, "done") << "row " << id << ": " << queue.row(id).last_error;
  }
  // Held, not failed: the rows wait, untouched, for the files to be fixed.
  for (const auto id : mismatched_rows) EXPECT_EQ(queue.row(id).status, "pending");
  for (const auto id : missing_rows) EXPECT_EQ(queue.row(id).status, "pending");
  for (const auto id : missing_rows) EXPECT_EQ(queue.row(id).attempts, 0);
  EXPECT_NE(result.err.find("subscriber " + std::to_string(mismatched) + ": client key " +
                            mismatched_key + " does not match client certificate " + client.cert),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("subscriber " + std::to_string(missing) + ": cannot read client key " +
                            missing_key),
            std::string::npos)
      << result.err;

  // Fixed: the held rows go out.
  std::filesystem::copy_file(client.key, mismatched_key,
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(client.key, missing_key);
  ASSERT_EQ(run_surge(dir, args).exit_code, 0);
  for (const auto id : mismatched_rows) EXPECT_EQ(queue.row(id).status, "done");
  for (const auto id : missing_rows) EXPECT_EQ(queue.row(id).status, "done");
}

}  // namespace
}  // namespace surge::testing
