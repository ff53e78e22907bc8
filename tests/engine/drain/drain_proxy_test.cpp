// Leaving through an egress proxy Surge did not write (tinyproxy, tests/support/tinyproxy.hpp):
// HTTPS and HTTP are tunnelled with CONNECT to an address Surge checked, a target the proxy
// refuses costs only its own subscriber, a silent or absent proxy ends in the connect timeout
// with the proxy named, and the target policy still holds for the final target.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include "tests/engine/drain/drain_faults_support.hpp"
#include "tests/support/e2e.hpp"
#include "tests/support/test_pki.hpp"
#include "tests/support/tinyproxy.hpp"

namespace surge::testing {
namespace {

constexpr auto npos = std::string::npos;

int count_with(const std::vector<std::string>& lines, const std::string& text) {
  return static_cast<int>(std::count_if(lines.begin(), lines.end(), [&](const std::string& line) {
    return line.find(text) != npos;
  }));
}

TEST(DrainProxy, HttpsAndHttpGoThroughTheProxyToTheAddressSurgeChecked) {
  temp_dir dir;
  const auto pki = make_test_pki(dir.path());
  test_queue queue(dir);
  sink_process secure(dir, queue.path(), {.tls_cert = pki.server_cert, .tls_key = pki.server_key});
  sink_process plain(dir, queue.path());
  tinyproxy_process proxy(dir, {secure.port(), plain.port()});

  // By name over HTTPS: Surge resolves "localhost", checks the address and asks the proxy for
  // 127.0.0.1; TLS inside the tunnel still verifies the certificate for "localhost".
  const auto https_id = queue.add_subscriber("http://placeholder/", 1000, 100);
  queue.set_url(https_id, secure.url_for(https_id, true, "localhost"));
  const auto http_id = queue.add_subscriber_at(plain, 1000, 100);
  queue.add_rows(https_id, 30);
  queue.add_rows(http_id, 30);

  const auto result =
      run_surge(dir, fast_drain(queue, {"--proxy", proxy.url(), "--ca-file", pki.ca_cert}));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(queue.count_by_status()["done"], 60);
  EXPECT_EQ(secure.stop_and_read().size(), 30u);
  EXPECT_EQ(plain.stop_and_read().size(), 30u);

  const auto requests = proxy.requests();
  const auto to_secure = "CONNECT 127.0.0.1:" + std::to_string(secure.port()) + " HTTP/1.1";
  const auto to_plain = "CONNECT 127.0.0.1:" + std::to_string(plain.port()) + " HTTP/1.1";
  EXPECT_GE(count_with(requests, to_secure), 1) << "HTTPS did not go through the proxy";
  EXPECT_GE(count_with(requests, to_plain), 1) << "HTTP did not go through the proxy";
  // Tunnels are kept-alive connections like any other: at most one per request in flight at
  // once (16 per subscriber by default), not one per row.
  EXPECT_LE(count_with(requests, "CONNECT"), 32);
  EXPECT_EQ(count_with(requests, "localhost"), 0) << "the proxy was given a name to resolve";
}

TEST(DrainProxy, ATargetTheProxyRefusesCostsOnlyItsOwnSubscriber) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process allowed(dir, queue.path());
  sink_process refused(dir, queue.path());
  tinyproxy_process proxy(dir, {allowed.port()});
  const auto good = queue.add_subscriber_at(allowed, 1000, 100);
  const auto bad = queue.add_subscriber_at(refused, 1000, 100);
  const auto good_rows = queue.add_rows(good, 20);
  const auto bad_rows = queue.add_rows(bad, 3);

  const auto result =
      run_surge(dir, fast_drain(queue, {"--proxy", proxy.url(), "--max-attempts", "2"}));
  ASSERT_TRUE(result.exit_code == 0 || result.exit_code == 5) << result.err;
  for (auto row : good_rows) EXPECT_EQ(queue.row(row).status, "done");
  const auto state = queue.row(bad_rows.front());
  EXPECT_NE(state.status, "done");
  const auto expected = "proxy 127.0.0.1:" + std::to_string(proxy.port()) +
                        " refused CONNECT to 127.0.0.1:" + std::to_string(refused.port()) +
                        " (127.0.0.1): 403 Access violation";
  EXPECT_NE(state.last_error.find(expected), npos) << state.last_error;
  EXPECT_TRUE(refused.stop_and_read().empty());
}

// A listener that never accepts: the kernel completes the TCP handshake from its backlog, and
// nothing ever answers the CONNECT.
class silent_listener {
 public:
  silent_listener() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address);
    ::listen(fd_, 64);
    socklen_t length = sizeof address;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
  }
  ~silent_listener() { ::close(fd_); }
  std::uint16_t port() const { return port_; }

 private:
  int fd_;
  std::uint16_t port_ = 0;
};

TEST(DrainProxy, ASilentOrAbsentProxyIsNamedInTheErrorAndEndsInTheConnectTimeout) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path());
  silent_listener silent;
  const auto absent = unused_port();
  const auto id = queue.add_subscriber_at(sink, 1000, 100);
  const auto row = queue.add_rows(id, 1).front();

  for (const auto& [port, expected] :
       std::map<std::uint16_t, std::string>{{silent.port(), " did not answer CONNECT to"},
                                            {absent, "connecting to proxy 127.0.0.1:"}}) {
    queue.db().exec("UPDATE webhook_delivery SET status = 'pending', attempts = 0");
    const auto result =
        run_surge(dir, fast_drain(queue, {"--proxy", "http://127.0.0.1:" + std::to_string(port),
                                          "--max-attempts", "1"}));
    ASSERT_TRUE(result.exit_code == 0 || result.exit_code == 5) << result.err;
    const auto state = queue.row(row);
    EXPECT_EQ(state.status, "dead");
    EXPECT_NE(state.last_error.find(expected), npos) << state.last_error;
  }
  EXPECT_TRUE(sink.stop_and_read().empty());
}

TEST(DrainProxy, TheTargetPolicyHoldsForTheFinalTargetAndTheProxyIsNeverAsked) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path());
  tinyproxy_process proxy(dir, {sink.port()});
  const auto id = queue.add_subscriber_at(sink, 1000, 100);
  const auto row = queue.add_rows(id, 1).front();

  auto args = fast_drain(queue, {"--proxy", proxy.url()});
  args.erase(std::find(args.begin(), args.end(), "--allow-private-targets"));
  const auto result = run_surge(dir, args);
  ASSERT_TRUE(result.exit_code == 0 || result.exit_code == 5) << result.err;
  EXPECT_NE(queue.row(row).last_error.find("refused non-public address 127.0.0.1"), npos)
      << queue.row(row).last_error;
  EXPECT_TRUE(proxy.requests().empty()) << "the proxy was asked for a refused target";
  EXPECT_TRUE(sink.stop_and_read().empty());
}

TEST(DrainProxy, EachSubscriberLeavesThroughItsOwnProxyAndADeadOneCostsOnlyItsSubscriber) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process proxied(dir, queue.path());
  sink_process direct(dir, queue.path());
  tinyproxy_process proxy(dir, {proxied.port(), direct.port()});
  const auto via_proxy = queue.add_subscriber_at(proxied, 1000, 100);
  const auto without = queue.add_subscriber_at(direct, 1000, 100);
  const auto via_dead_proxy = queue.add_subscriber_at(direct, 1000, 100);
  const auto proxied_rows = queue.add_rows(via_proxy, 20);
  const auto direct_rows = queue.add_rows(without, 20);
  const auto stranded = queue.add_rows(via_dead_proxy, 3);

  // Set through the CLI, as an operator would.
  auto set = run_surge(dir, {"subscriber", "set", "--db", queue.path(), std::to_string(via_proxy),
                             "--proxy", proxy.url()});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  set = run_surge(dir, {"subscriber", "set", "--db", queue.path(), std::to_string(via_dead_proxy),
                        "--proxy", "http://127.0.0.1:" + std::to_string(unused_port())});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  const auto bad = run_surge(dir, {"subscriber", "set", "--db", queue.path(),
                                   std::to_string(without), "--proxy", "https://egress:3128"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--proxy: 'https://egress:3128' is not http://HOST:PORT"), npos)
      << bad.err;
  const auto listed = run_surge(dir, {"subscriber", "list", "--db", queue.path()});
  EXPECT_NE(listed.out.find("proxy " + proxy.url()), npos) << listed.out;

  const auto result = run_surge(dir, fast_drain(queue, {"--max-attempts", "2"}));
  ASSERT_TRUE(result.exit_code == 0 || result.exit_code == 5) << result.err;
  for (auto row : proxied_rows) EXPECT_EQ(queue.row(row).status, "done");
  for (auto row : direct_rows) EXPECT_EQ(queue.row(row).status, "done");
  const auto state = queue.row(stranded.front());
  EXPECT_NE(state.status, "done");
  EXPECT_NE(state.last_error.find("connecting to proxy 127.0.0.1:"), npos) << state.last_error;

  const auto requests = proxy.requests();
  EXPECT_GE(count_with(requests, "CONNECT 127.0.0.1:" + std::to_string(proxied.port())), 1);
  EXPECT_EQ(count_with(requests, "CONNECT 127.0.0.1:" + std::to_string(direct.port())), 0)
      << "a subscriber without a proxy of its own went through one";
}

}  // namespace
}  // namespace surge::testing
