// What a shard does with a partner's host name, on a simulated clock: one lookup at a time per
// name, the answer kept for its TTL (held within bounds), a failure kept briefly, and a bound
// on the names kept.
#include <gtest/gtest.h>

#include "engine/net/dns_cache.hpp"

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using step = dns_cache::step;

const dns_cache::time_point t0{std::chrono::hours(1)};

dns_answer addresses(std::uint8_t last) { return {{proto::ip_address::v4(192, 0, 2, last)}, {}}; }

TEST(DnsCache, OneLookupPerNameAtATimeAndItsAnswerIsKeptForItsTtl) {
  dns_config config;
  dns_cache cache(config);
  EXPECT_EQ(cache.ask("a.example", t0).what, step::start_lookup);
  // Everyone else asking meanwhile waits for that lookup; another name has its own.
  EXPECT_EQ(cache.ask("a.example", t0 + 1ms).what, step::join_lookup);
  EXPECT_EQ(cache.ask("b.example", t0 + 1ms).what, step::start_lookup);
  EXPECT_EQ(cache.lookups_under_way(), 2u);

  cache.on_answer("a.example", addresses(7), 30s, t0 + 100ms);
  EXPECT_EQ(cache.lookups_under_way(), 1u);
  auto kept = cache.ask("a.example", t0 + 30s);
  ASSERT_EQ(kept.what, step::cached);
  ASSERT_EQ(kept.answer->addresses.size(), 1u);
  EXPECT_EQ(kept.answer->addresses[0].bytes[3], 7);
  // Its TTL over, the name is looked up again, once.
  EXPECT_EQ(cache.ask("a.example", t0 + 100ms + 30s).what, step::start_lookup);
  EXPECT_EQ(cache.ask("a.example", t0 + 100ms + 30s).what, step::join_lookup);
}

TEST(DnsCache, TtlsAreHeldWithinTheirBounds) {
  dns_config config;
  config.min_ttl = 2s;
  config.max_ttl = 60s;
  dns_cache cache(config);
  cache.ask("zero.example", t0);
  cache.on_answer("zero.example", addresses(1), 0s, t0);
  EXPECT_EQ(cache.ask("zero.example", t0 + 1999ms).what, step::cached) << "a 0 TTL is held 2 s";
  EXPECT_EQ(cache.ask("zero.example", t0 + 2s).what, step::start_lookup);

  cache.ask("day.example", t0);
  cache.on_answer("day.example", addresses(2), 86400s, t0);
  EXPECT_EQ(cache.ask("day.example", t0 + 59s).what, step::cached);
  EXPECT_EQ(cache.ask("day.example", t0 + 60s).what, step::start_lookup) << "held to 60 s";
}

TEST(DnsCache, AFailureIsKeptBrieflySoTheRowsBehindItFailAtOnce) {
  dns_config config;
  config.failure_ttl = 5s;
  dns_cache cache(config);
  cache.ask("gone.example", t0);
  cache.on_answer("gone.example", {{}, "Domain name not found"}, 3600s, t0 + 1s);
  const auto kept = cache.ask("gone.example", t0 + 5999ms);
  ASSERT_EQ(kept.what, step::cached);
  EXPECT_TRUE(kept.answer->addresses.empty());
  EXPECT_EQ(kept.answer->error, "Domain name not found");
  EXPECT_EQ(cache.ask("gone.example", t0 + 6s).what, step::start_lookup)
      << "a failure is kept failure_ttl, not the TTL given";
}

TEST(DnsCache, PastItsBoundTheAnswerExpiringSoonestGoesButNeverALookupUnderWay) {
  dns_config config;
  config.max_hosts = 3;
  dns_cache cache(config);
  cache.ask("waiting.example", t0);  // under way throughout
  cache.ask("short.example", t0);
  cache.on_answer("short.example", addresses(1), 10s, t0);
  cache.ask("long.example", t0);
  cache.on_answer("long.example", addresses(2), 100s, t0);
  EXPECT_EQ(cache.size(), 3u);

  EXPECT_EQ(cache.ask("new.example", t0 + 1s).what, step::start_lookup);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.ask("long.example", t0 + 1s).what, step::cached);
  EXPECT_EQ(cache.ask("waiting.example", t0 + 1s).what, step::join_lookup);
  // short.example went: asking for it starts a lookup again (which makes room in turn).
  EXPECT_EQ(cache.ask("short.example", t0 + 1s).what, step::start_lookup);
}

}  // namespace
}  // namespace surge::engine
