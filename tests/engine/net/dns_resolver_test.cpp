// The shard's resolver (c-ares on the shard's io_context) against a DNS server on loopback
// (tests/support/dns_server.hpp): a silent or slow name server delays only its own names, an
// answer is used for its TTL without asking again, failures come back with c-ares's reason,
// and a caller that gives up gets its answer at its deadline.
#include "engine/net/dns_resolver.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include "tests/support/dns_server.hpp"

namespace surge::engine {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using rule = testing::dns_server::rule;

struct resolved {
  std::optional<dns_lookup> lookup;
  int order = 0;  // 1 for the first lookup to end, 2 for the next...
};

class DnsResolver : public ::testing::Test {
 protected:
  dns_config config_for_server() {
    dns_config config;
    config.servers = server_.address();
    return config;
  }
  // Starts a lookup of `host` that waits until `deadline` at most.
  void start(dns_resolver& resolver, const std::string& host, resolved& out,
             std::chrono::steady_clock::duration wait = 10s) {
    asio::co_spawn(
        io_,
        [&, host, wait]() -> asio::awaitable<void> {
          out.lookup = co_await resolver.resolve(host, std::chrono::steady_clock::now() + wait);
          out.order = ++ended_;
        },
        asio::detached);
  }

  testing::dns_server server_;
  asio::io_context io_;
  int ended_ = 0;
};

std::string first_address(const dns_lookup& lookup) {
  if (lookup.answer.addresses.empty()) return "none: " + lookup.answer.error;
  const auto& b = lookup.answer.addresses.front().bytes;
  return std::to_string(b[0]) + "." + std::to_string(b[1]) + "." + std::to_string(b[2]) + "." +
         std::to_string(b[3]);
}

TEST_F(DnsResolver, ASilentOrSlowNameServerHoldsUpOnlyItsOwnNames) {
  server_.set("silent.test", {.what = rule::kind::silent});
  server_.set("slow.test", {.ipv4 = {"127.0.0.3"}, .delay = 1200ms});
  server_.set("healthy.test", {.ipv4 = {"127.0.0.2"}});
  // The slow answer comes after c-ares has sent its query again: the late answer still counts.
  auto config = config_for_server();
  config.try_timeout = 1s;
  dns_resolver resolver(io_.get_executor(), config);

  resolved silent, slow, healthy;
  start(resolver, "silent.test", silent, 2500ms);
  start(resolver, "slow.test", slow);
  start(resolver, "healthy.test", healthy);
  io_.run();

  ASSERT_TRUE(healthy.lookup && slow.lookup && silent.lookup);
  EXPECT_EQ(healthy.order, 1) << "the healthy name waited behind another";
  EXPECT_EQ(first_address(*healthy.lookup), "127.0.0.2");
  EXPECT_EQ(slow.order, 2);
  EXPECT_EQ(first_address(*slow.lookup), "127.0.0.3") << "a 1.2 s answer is still an answer";
  EXPECT_EQ(silent.order, 3);
  EXPECT_TRUE(silent.lookup->timed_out);
}

TEST_F(DnsResolver, AnAnswerServesEveryConnectWithinItsTtlAndOneLookupServesConcurrentAskers) {
  server_.set("kept.test", {.ipv4 = {"127.0.0.4"}, .ttl = 60, .delay = 50ms});
  dns_resolver resolver(io_.get_executor(), config_for_server());
  std::vector<resolved> together(20);
  for (auto& r : together) start(resolver, "kept.test", r);
  io_.run();
  io_.restart();
  std::vector<resolved> later(20);
  for (auto& r : later) start(resolver, "kept.test", r);
  io_.run();
  for (const auto& r : together) EXPECT_EQ(first_address(*r.lookup), "127.0.0.4");
  for (const auto& r : later) EXPECT_EQ(first_address(*r.lookup), "127.0.0.4");
  EXPECT_EQ(server_.a_queries("kept.test"), 1);
  EXPECT_EQ(resolver.lookups_started(), 1);
}

TEST_F(DnsResolver, AnExpiredAnswerIsLookedUpAgain) {
  server_.set("short.test", {.ipv4 = {"127.0.0.5"}, .ttl = 1});
  auto config = config_for_server();
  config.min_ttl = 0s;
  dns_resolver resolver(io_.get_executor(), config);
  resolved first, second;
  start(resolver, "short.test", first);
  io_.run();
  io_.restart();
  server_.set("short.test", {.ipv4 = {"127.0.0.6"}, .ttl = 1});
  std::this_thread::sleep_for(1100ms);
  start(resolver, "short.test", second);
  io_.run();
  EXPECT_EQ(first_address(*first.lookup), "127.0.0.5");
  EXPECT_EQ(first_address(*second.lookup), "127.0.0.6");
  EXPECT_EQ(server_.a_queries("short.test"), 2);
}

TEST_F(DnsResolver, ANameThatDoesNotExistFailsWithTheReasonAndIsNotAskedAgainAtOnce) {
  dns_resolver resolver(io_.get_executor(), config_for_server());
  resolved first, second;
  start(resolver, "missing.test", first);
  io_.run();
  io_.restart();
  start(resolver, "missing.test", second);
  io_.run();
  ASSERT_TRUE(first.lookup && second.lookup);
  EXPECT_FALSE(first.lookup->timed_out);
  EXPECT_TRUE(first.lookup->answer.addresses.empty());
  EXPECT_EQ(first.lookup->answer.error, "Domain name not found");
  EXPECT_EQ(second.lookup->answer.error, "Domain name not found");
  EXPECT_EQ(server_.a_queries("missing.test"), 1) << "the failure is kept for failure_ttl";
}

TEST_F(DnsResolver, NamesInEtcHostsAndTheResolversOwnConfigurationWork) {
  // No server given: /etc/resolv.conf and /etc/hosts, as a drain started by an operator uses.
  dns_resolver resolver(io_.get_executor(), dns_config{});
  resolved local;
  start(resolver, "localhost", local);
  io_.run();
  ASSERT_TRUE(local.lookup);
  ASSERT_FALSE(local.lookup->answer.addresses.empty()) << local.lookup->answer.error;
  EXPECT_EQ(proto::classify_address(local.lookup->answer.addresses.front()),
            proto::address_class::loopback);
}

TEST_F(DnsResolver, ABadServerListIsRefusedAtStart) {
  dns_config config;
  config.servers = "not an address";
  EXPECT_THROW(dns_resolver(io_.get_executor(), config), std::runtime_error);
}

TEST_F(DnsResolver, DestroyedWithLookupsUnderWayItLeavesItsWaitersToTheirDeadline) {
  server_.set("silent.test", {.what = rule::kind::silent});
  resolved waiting;
  {
    auto resolver = std::make_unique<dns_resolver>(io_.get_executor(), config_for_server());
    start(*resolver, "silent.test", waiting, 300ms);
    io_.poll();  // the lookup is sent
  }
  io_.run();
  ASSERT_TRUE(waiting.lookup);
  EXPECT_TRUE(waiting.lookup->timed_out);
}

}  // namespace
}  // namespace surge::engine
