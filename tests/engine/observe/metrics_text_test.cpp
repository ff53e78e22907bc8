// The Prometheus text a drain serves, rendered from what the shards publish: which partner is
// held, and why, as a labelled series an alert can name.
#include "engine/observe/metrics_text.hpp"

#include <gtest/gtest.h>

#include <string>

namespace surge::engine {
namespace {

std::size_t occurrences(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

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

  const auto text = metrics_text(metrics, 10);
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
  const auto text = metrics_text(metrics, 10);
  EXPECT_NE(text.find("# TYPE surge_in_flight_limit gauge"), std::string::npos);
  EXPECT_NE(text.find("\nsurge_in_flight_limit 56\n"), std::string::npos) << text;
}

TEST(Metrics, HeldSeriesAreBoundedByTheTopCount) {
  drain_metrics metrics(1);
  drain_metrics::shard_view view;
  for (std::int64_t id = 1; id <= 50; ++id) view.held.push_back({.id = id, .kind = "credentials"});
  metrics.publish(0, view);
  const auto text = metrics_text(metrics, 3);
  EXPECT_EQ(occurrences(text, "surge_subscriber_held{"), 3u);
  EXPECT_NE(text.find("surge_subscriber_held{subscriber=\"1\""), std::string::npos);
  EXPECT_EQ(text.find("surge_subscriber_held{subscriber=\"4\""), std::string::npos);
}

// One host seen by two shards is one set of series: counts add up, the best latency is the
// lowest measured and the acceptable one the highest; a host name cannot break the exposition.
TEST(Metrics, AnOriginSeenByTwoShardsIsMergedIntoOneSetOfSeries) {
  drain_metrics metrics(2);
  drain_metrics::shard_view first;
  first.origins.push_back({.origin = "https://partner.example:443",
                           .subscribers = 3,
                           .rate_limit = 30,
                           .in_flight = 5,
                           .limit = 8,
                           .need = 12,
                           .waiting_for_origin = 1,
                           .best_latency = 0.2,
                           .usual_latency = 0.21,
                           .acceptable_latency = 0.402});
  first.origins.push_back({.origin = "http://odd\"host:80", .subscribers = 1});
  drain_metrics::shard_view second;
  second.origins.push_back({.origin = "https://partner.example:443",
                            .subscribers = 2,
                            .rate_limit = 20,
                            .in_flight = 4,
                            .limit = 16,
                            .need = 10,
                            .waiting_for_shard = 2,
                            .best_latency = 0.18,
                            .usual_latency = 0.3,
                            .acceptable_latency = 0.6,
                            .judged_by_usual = true});
  metrics.publish(0, first);
  metrics.publish(1, second);
  const auto text = metrics_text(metrics, 10);
  const std::string origin = "{origin=\"https://partner.example:443\"}";
  for (const auto& expected : {
           "surge_origin_subscribers" + origin + " 5\n",
           "surge_origin_rate_limit" + origin + " 50\n",
           "surge_origin_in_flight_requests" + origin + " 9\n",
           "surge_origin_in_flight_limit" + origin + " 24\n",
           "surge_origin_in_flight_need" + origin + " 22\n",
           "surge_origin_best_latency_seconds" + origin + " 0.17999999999999999\n",
           "surge_origin_usual_latency_seconds" + origin + " 0.29999999999999999\n",
           "surge_origin_acceptable_latency_seconds" + origin + " 0.59999999999999998\n",
           "surge_origin_judged_by_usual" + origin + " 1\n",
           std::string("surge_origin_waiting_subscribers{origin=\"https://partner.example:443\","
                       "for=\"origin\"} 1\n"),
           std::string("surge_origin_waiting_subscribers{origin=\"https://partner.example:443\","
                       "for=\"shard\"} 2\n"),
           std::string("surge_origin_subscribers{origin=\"http://odd\\\"host:80\"} 1\n"),
       }) {
    EXPECT_NE(text.find(expected), std::string::npos) << expected << " in\n" << text;
  }
  // The odd host has no limit (0) and no latency yet: those series are absent, not 0.
  EXPECT_EQ(text.find("surge_origin_in_flight_limit{origin=\"http://odd"), std::string::npos);
  EXPECT_EQ(text.find("surge_origin_best_latency_seconds{origin=\"http://odd"), std::string::npos);
}

TEST(Metrics, OriginSeriesAreBoundedByTheTopCountBusiestFirst) {
  drain_metrics metrics(1);
  drain_metrics::shard_view view;
  for (int i = 0; i < 20; ++i) {
    view.origins.push_back(
        {.origin = "https://host-" + std::to_string(i) + ".test:443", .in_flight = i});
  }
  metrics.publish(0, view);
  const auto text = metrics_text(metrics, 3);
  EXPECT_EQ(occurrences(text, "surge_origin_in_flight_requests{"), 3u);
  EXPECT_NE(text.find("surge_origin_in_flight_requests{origin=\"https://host-19.test:443\"} 19"),
            std::string::npos);
  EXPECT_EQ(text.find("host-16.test"), std::string::npos);
}

}  // namespace
}  // namespace surge::engine
