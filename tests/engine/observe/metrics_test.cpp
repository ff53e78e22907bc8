// The Prometheus text a drain serves, rendered from what the shards publish: which partner is
// held, and why, as a labelled series an alert can name.
#include "engine/observe/metrics.hpp"

#include <gtest/gtest.h>

#include <string>

namespace surge::engine {
namespace {

TEST(Metrics, HeldSubscribersAreNamedWithTheirReasonAcrossShards) {
  drain_metrics metrics(2);
  drain_metrics::shard_view first;
  first.held.push_back({.id = 4,
                        .kind = "paused",
                        .reason = "subscriber paused by Retry-After",
                        .until_unix = 1.9e9});
  drain_metrics::shard_view second;
  second.held.push_back({.id = 7, .kind = "circuit_open", .reason = "circuit open"});
  metrics.publish(0, first);
  metrics.publish(1, second);

  const auto text = metrics.render(10);
  EXPECT_NE(text.find("# TYPE surge_subscriber_held gauge"), std::string::npos);
  EXPECT_NE(text.find("surge_subscriber_held{subscriber=\"4\",reason=\"paused\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("surge_subscriber_held{subscriber=\"7\",reason=\"circuit_open\"} 1"),
            std::string::npos);
  const auto held = metrics.held_subscribers();
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[0].reason, "subscriber paused by Retry-After");
}

TEST(Metrics, TheShardsInFlightLimitsAreSummed) {
  drain_metrics metrics(2);
  drain_metrics::shard_view first;
  first.in_flight_limit = 16;
  drain_metrics::shard_view second;
  second.in_flight_limit = 40;
  metrics.publish(0, first);
  metrics.publish(1, second);
  const auto text = metrics.render(10);
  EXPECT_NE(text.find("# TYPE surge_in_flight_limit gauge"), std::string::npos);
  EXPECT_NE(text.find("\nsurge_in_flight_limit 56\n"), std::string::npos) << text;
}

TEST(Metrics, HeldSeriesAreBoundedByTheTopCount) {
  drain_metrics metrics(1);
  drain_metrics::shard_view view;
  for (std::int64_t id = 1; id <= 50; ++id) view.held.push_back({.id = id, .kind = "credentials"});
  metrics.publish(0, view);
  const auto text = metrics.render(3);
  std::size_t series = 0;
  for (auto at = text.find("surge_subscriber_held{"); at != std::string::npos;
       at = text.find("surge_subscriber_held{", at + 1)) {
    ++series;
  }
  EXPECT_EQ(series, 3u);
  EXPECT_NE(text.find("surge_subscriber_held{subscriber=\"1\""), std::string::npos);
  EXPECT_EQ(text.find("surge_subscriber_held{subscriber=\"4\""), std::string::npos);
}

}  // namespace
}  // namespace surge::engine
