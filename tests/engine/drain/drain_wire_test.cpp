// What comes off a real socket, through the real CLI: TLS housekeeping that is not a response
// nobody asked for (one that is, is the HTTP client's own test,
// tests/engine/net/http_peer_faults_test.cpp); and `emit` refusing an event type that would
// inject. Interim 1xx responses are the response reader's rule
// (tests/engine/net/response_reader_test.cpp); a queued event type that would inject is
// dead-lettered unsent by the shard core (tests/engine/shard/core_partner_test.cpp).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "tests/support/e2e.hpp"
#include "tests/support/test_pki.hpp"

namespace surge::testing {
namespace {

constexpr auto npos = std::string::npos;

std::vector<std::string> drain_args(const test_queue& queue, std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"drain",
                                "--db",
                                queue.path(),
                                "--until-drained",
                                "--allow-private-targets",
                                "--progress-interval",
                                "0",
                                "--connect-timeout",
                                "2",
                                "--attempt-timeout",
                                "2",
                                "--max-attempts",
                                "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

void set_max_in_flight(test_queue& queue, std::int64_t subscriber, int cap) {
  queue.db().exec("UPDATE webhook_subscriber SET max_in_flight = " + std::to_string(cap) +
                  " WHERE id = " + std::to_string(subscriber));
}

TEST(DrainWire, EmitRefusesAnEventTypeWithControlCharacters) {
  temp_dir dir;
  test_queue queue(dir);
  queue.add_subscriber("http://placeholder/", 10, 10);
  for (const std::string type : {"a\r\nb", "a\nX-Injected: 1", "a\x07"}) {
    const auto result =
        run_surge(dir, {"emit", "--db", queue.path(), "--type", type, "--data", "{}"});
    EXPECT_EQ(result.exit_code, 2) << result.out << result.err;
    EXPECT_NE(result.err.find("--type contains"), npos) << result.err;
  }
  EXPECT_TRUE(queue.count_by_status().empty());
  const auto fine =
      run_surge(dir, {"emit", "--db", queue.path(), "--type", "video.trending", "--data", "{}"});
  EXPECT_EQ(fine.exit_code, 0) << fine.err;
}

// The idle check must not mistake TLS housekeeping (TLS 1.3 session tickets) for a stray
// response: a healthy HTTPS connection is still reused.
TEST(DrainWire, HealthyTlsConnectionsAreStillReused) {
  for (const std::string version : {"", "1.2"}) {
    temp_dir dir;
    const auto pki = make_test_pki(dir.path());
    test_queue queue(dir);
    sink_process sink(
        dir, queue.path(),
        {.tls_cert = pki.server_cert, .tls_key = pki.server_key, .tls_max_version = version});
    const auto id = queue.add_subscriber("http://placeholder/", 1000, 100);
    queue.set_url(id, sink.url_for(id, true, "localhost"));
    set_max_in_flight(queue, id, 1);
    const auto rows = queue.add_rows(id, 12);
    const auto result = run_surge(dir, drain_args(queue, {"--ca-file", pki.ca_cert}));
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_EQ(queue.count_by_status()["done"], static_cast<std::int64_t>(rows.size()));
    const auto requests = sink.stop_and_read();
    std::set<std::uint64_t> connections;
    for (const auto& request : requests) connections.insert(request.connection_id);
    EXPECT_EQ(requests.size(), rows.size());
    EXPECT_LE(connections.size(), 2u) << "TLS " << (version.empty() ? "1.3" : version);
  }
}

}  // namespace
}  // namespace surge::testing
