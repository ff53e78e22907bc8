// Partners with their own DNS, end to end: a drain (`--dns-server`) whose subscribers sit
// behind names that resolve at once, after 1.2 s, to NXDOMAIN, or never. The rows of the
// healthy and the slow names are all delivered; the others fail with the DNS error in
// last_error; each name is looked up once per shard within its TTL. The resolver's rules are
// proved in tests/engine/net (dns_cache_test, dns_resolver_test); this is the wiring.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/engine/drain/drain_faults_support.hpp"
#include "tests/support/dns_server.hpp"
#include "tests/support/e2e.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;
using rule = dns_server::rule;
constexpr auto npos = std::string::npos;

TEST(DrainDns, ASlowFailingOrSilentNameCostsOnlyTheSubscribersBehindIt) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path());
  dns_server dns;

  struct partner {
    std::string name;
    rule how;
  };
  std::vector<partner> partners;
  for (int i = 0; i < 4; ++i) {
    partners.push_back({"healthy-" + std::to_string(i) + ".test", {.ipv4 = {"127.0.0.1"}}});
  }
  for (int i = 0; i < 2; ++i) {
    const auto n = std::to_string(i);
    partners.push_back({"slow-" + n + ".test", {.ipv4 = {"127.0.0.1"}, .delay = 1200ms}});
    partners.push_back({"missing-" + n + ".test", {.what = rule::kind::nxdomain}});
    partners.push_back({"silent-" + n + ".test", {.what = rule::kind::silent}});
  }
  std::map<std::int64_t, const partner*> by_row;
  for (const auto& p : partners) {
    dns.set(p.name, p.how);
    const auto id = queue.add_subscriber("http://placeholder/", 200, 20);
    queue.set_url(id, sink.url_for(id, false, p.name));
    for (auto row : queue.add_rows(id, 20)) by_row[row] = &p;
  }

  // Three seconds to connect: the slow names' 1.2 s lookups fit, the silent ones' never do.
  auto args =
      fast_drain(queue, {"--threads", "2", "--max-attempts", "2", "--dns-server", dns.address()},
                 {.connect = "3", .attempt = "4", .lease = "10"});
  const auto result = run_surge(dir, args);
  // The failing partners' circuits open and hold their rows: drained except those (exit 5).
  ASSERT_EQ(result.exit_code, 5) << result.err;

  // Rows of the failing names carry the DNS error once tried; after ten failures the
  // partner's circuit opens and its other rows wait untried.
  std::map<std::string, int> failed_with_dns_error;
  for (const auto& [row, p] : by_row) {
    const auto state = queue.row(row);
    if (p->name.starts_with("healthy") || p->name.starts_with("slow")) {
      EXPECT_EQ(state.status, "done") << p->name << ": " << state.last_error;
      continue;
    }
    EXPECT_NE(state.status, "done") << p->name;
    if (state.attempts == 0) continue;
    bool dns_error = false;
    if (p->name.starts_with("missing")) {
      dns_error = state.last_error.find("resolving " + p->name + ": Domain name not found") != npos;
    } else {
      // The connect gave up waiting ("timed out"), or c-ares did and its answer was kept.
      dns_error =
          state.last_error.find("resolving " + p->name + " timed out") != npos ||
          state.last_error.find("resolving " + p->name + ": Timeout while contacting DNS") != npos;
    }
    EXPECT_TRUE(dns_error) << state.last_error;
    failed_with_dns_error[p->name] += dns_error ? 1 : 0;
  }
  for (const auto& p : partners) {
    if (p.how.what != rule::kind::answer) {
      EXPECT_GE(failed_with_dns_error[p.name], 1) << p.name;
    }
  }
  // Within their TTL (60 s) names are asked once per shard, not once per connection or row.
  for (const auto& p : partners) {
    if (p.how.what == rule::kind::silent) continue;
    EXPECT_GE(dns.a_queries(p.name), 1) << p.name;
    EXPECT_LE(dns.a_queries(p.name), 2) << p.name;
  }
}

}  // namespace
}  // namespace surge::testing
