// What `surge drain`'s flags become in the engine's configuration (tools/drain_options): the
// defaults an operator gets without a flag, and the flags that turn them off.
#include "tools/drain_options.hpp"

#include <gtest/gtest.h>

#include <string>

#include "tools/commands.hpp"

namespace surge::tools {
namespace {

// A PostgreSQL URI passes the --db check without a file; nothing connects to it here.
engine::drain_config parsed(const std::string& args) {
  CLI::App app;
  drain_cli_options options;
  add_drain_options(&app, options);
  app.parse(args, false);
  return to_drain_config(options);
}

// The flags' defaults come from engine/config.hpp; a literal written again in the CLI, or a unit
// lost in the seconds-to-milliseconds round trip, makes the two differ.
TEST(DrainOptions, WithoutFlagsTheEngineGetsItsOwnDefaults) {
  auto config = parsed("--db postgresql://localhost/queue");
  EXPECT_EQ(config.storage.db_path, "postgresql://localhost/queue");
  config.storage.db_path.clear();
  const engine::drain_config defaults;
  EXPECT_TRUE(config.http == defaults.http);
  EXPECT_TRUE(config.scheduler == defaults.scheduler);
  EXPECT_TRUE(config.storage == defaults.storage);
  EXPECT_TRUE(config.retry == defaults.retry);
  EXPECT_TRUE(config == defaults);
}

TEST(DrainOptions, AFlagChangesOnlyItsOwnField) {
  auto config = parsed("--db postgresql://localhost/queue --lease 90");
  EXPECT_EQ(config.storage.lease, std::chrono::seconds(90));
  config.storage.db_path.clear();
  config.storage.lease = engine::drain_config{}.storage.lease;
  EXPECT_TRUE(config == engine::drain_config{});
}

// The flags whose rules are proved on the shard core's simulated clock reach the fields the
// core reads; no drain process is needed to see that.
TEST(DrainOptions, TheRetryAndConcurrencyFlagsReachTheirFields) {
  const auto config = parsed(
      "--db postgresql://localhost/queue --max-attempts 3 --max-age 1000 --retry-base 0.4 "
      "--max-in-flight 2 --per-subscriber-in-flight 5 --max-payload-memory 32");
  EXPECT_EQ(config.retry.max_attempts, 3);
  EXPECT_EQ(config.retry.max_age, std::chrono::seconds(1000));
  EXPECT_EQ(config.retry.base_delay, std::chrono::milliseconds(400));
  EXPECT_TRUE(config.retry_given.max_attempts);
  EXPECT_TRUE(config.retry_given.max_age);
  EXPECT_TRUE(config.retry_given.base_delay);
  EXPECT_FALSE(config.retry_given.max_delay);
  EXPECT_EQ(config.scheduler.max_in_flight, 2);
  EXPECT_EQ(config.scheduler.per_subscriber_in_flight, 5);
  EXPECT_EQ(config.scheduler.max_payload_memory, 32 * 1024 * 1024) << "MiB";
}

TEST(DrainOptions, NameServersAreGivenByAddressWithAnOptionalPort) {
  const auto config =
      parsed("--db postgresql://localhost/queue --dns-server 127.0.0.1:5353,[::1]:53,192.0.2.1");
  EXPECT_EQ(config.http.dns.servers, "127.0.0.1:5353,[::1]:53,192.0.2.1");
  for (const auto* bad : {"ns.example", "127.0.0.1:0", "127.0.0.1:99999", "::1:53", "[::1",
                          "127.0.0.1,", "127.0.0.1:x"}) {
    EXPECT_THROW(parsed(std::string("--db postgresql://localhost/queue --dns-server ") + bad),
                 CLI::ValidationError)
        << bad;
  }
}

TEST(DrainOptions, AProxyIsAnHttpUrlWithAHostAndAPortOnly) {
  const auto config =
      parsed("--db postgresql://localhost/queue --proxy http://egress.internal:3128");
  ASSERT_TRUE(config.http.proxy);
  EXPECT_EQ(config.http.proxy->host, "egress.internal");
  EXPECT_EQ(config.http.proxy->port, 3128);
  const auto v6 = parsed("--db postgresql://localhost/queue --proxy http://[fd00::1]:8080");
  EXPECT_EQ(v6.http.proxy->host, "fd00::1");
  EXPECT_FALSE(parsed("--db postgresql://localhost/queue").http.proxy) << "none by default";
  for (const auto* bad : {"https://egress:3128", "http://egress:3128/path", "egress:3128",
                          "http://user:secret@egress:3128"}) {
    EXPECT_THROW(parsed(std::string("--db postgresql://localhost/queue --proxy ") + bad),
                 usage_error)
        << bad;
  }
}

TEST(DrainOptions, AllowedTargetRangesAreCidrsAndABadOneIsAUsageError) {
  const auto config =
      parsed("--db postgresql://localhost/queue --allow-targets 10.8.0.0/16,fd00::/8");
  ASSERT_EQ(config.http.allowed_target_ranges.size(), 2u);
  EXPECT_EQ(config.http.allowed_target_ranges[0], *proto::parse_address_range("10.8.0.0/16"));
  EXPECT_EQ(config.http.allowed_target_ranges[1], *proto::parse_address_range("fd00::/8"));
  EXPECT_FALSE(config.http.allow_private_targets);
  EXPECT_TRUE(parsed("--db postgresql://localhost/queue").http.allowed_target_ranges.empty());
  for (const auto* bad : {"10.8.0.1/16", "10.8.0.0/16,", "vpn.internal", "10.8.0.0/40"}) {
    EXPECT_THROW(parsed(std::string("--db postgresql://localhost/queue --allow-targets ") + bad),
                 usage_error)
        << bad;
  }
}

TEST(DrainOptions, TheOriginLimitIsOnByDefault) {
  const auto config = parsed("--db postgresql://localhost/queue");
  EXPECT_EQ(config.scheduler.origin.latency_tolerance, 2.0);
  EXPECT_EQ(config.scheduler.origin.latency_slack, engine::origin_limit_config{}.latency_slack);
  EXPECT_GT(config.scheduler.origin.latency_tolerance, 0.0) << "0 would turn it off";
}

TEST(DrainOptions, ZeroTurnsTheOriginLimitOffAndBelowOneIsRefused) {
  const auto off = parsed("--db postgresql://localhost/queue --origin-latency-tolerance 0");
  EXPECT_EQ(off.scheduler.origin.latency_tolerance, 0.0);
  EXPECT_THROW(parsed("--db postgresql://localhost/queue --origin-latency-tolerance 0.5"),
               usage_error);
}

TEST(DrainOptions, TheDefaultsKeepTheDocumentedConcurrencyAndPolling) {
  const auto config = parsed("--db postgresql://localhost/queue");
  EXPECT_EQ(config.scheduler.max_in_flight, 4096);
  EXPECT_EQ(config.scheduler.per_subscriber_in_flight, 16);
  EXPECT_EQ(config.scheduler.idle_poll_min, std::chrono::milliseconds(100));
  EXPECT_EQ(config.scheduler.idle_poll_max, std::chrono::milliseconds(500));
  EXPECT_EQ(config.storage.new_rows_check_interval, std::chrono::milliseconds(2));
  EXPECT_EQ(config.storage.cache_kib, 16 * 1024) << "the page cache the drain asks SQLite for";
}

}  // namespace
}  // namespace surge::tools
