// The live page's data: the partner view as JSON, every field the page's script reads.
#include "engine/observe/live_page.hpp"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include "engine/observe/metrics.hpp"
#include "engine/observe/metrics_text.hpp"

namespace surge::engine {
namespace {

namespace json = boost::json;

TEST(LivePage, PartnersJsonCarriesStateReasonRowsAndEta) {
  partner_row held{.id = 6,
                   .state = partner_state::circuit_open,
                   .reason = "circuit open",
                   .since_unix = 1000,
                   .queued = 300,
                   .failed = 15,
                   .last_error = "http 500: <b>\"no\"</b>",
                   .last_error_unix = 1010};
  partner_row sending{.id = 1,
                      .state = partner_state::at_limit,
                      .rate_limit = 10,
                      .paced_rate = 10,
                      .achieved_rate = 10,
                      .queued = 50,
                      .delivered = 100,
                      .eta_seconds = 5.0};
  const auto parsed = json::parse(partners_json({held, sending}, {}, 1020));
  const auto& out = parsed.as_object();
  EXPECT_EQ(out.at("now").as_double(), 1020);
  const auto& totals = out.at("totals").as_object();
  EXPECT_EQ(totals.at("backlog").as_int64(), 50);
  EXPECT_EQ(totals.at("held_rows").as_int64(), 300);
  EXPECT_EQ(totals.at("held_partners").as_int64(), 1);
  EXPECT_EQ(totals.at("eta_seconds").as_double(), 5);
  const auto& partners = out.at("partners").as_array();
  ASSERT_EQ(partners.size(), 2u);
  const auto& first = partners[0].as_object();
  EXPECT_EQ(first.at("subscriber").as_int64(), 6);
  EXPECT_EQ(first.at("state").as_string(), "circuit_open");
  EXPECT_TRUE(first.at("held").as_bool());
  EXPECT_EQ(first.at("since").as_double(), 1000);
  EXPECT_TRUE(first.at("until").is_null());
  EXPECT_TRUE(first.at("eta_seconds").is_null());
  EXPECT_EQ(first.at("last_error").as_string(), "http 500: <b>\"no\"</b>");
  const auto& second = partners[1].as_object();
  EXPECT_EQ(second.at("state").as_string(), "at_limit");
  EXPECT_FALSE(second.at("held").as_bool());
  EXPECT_EQ(second.at("eta_seconds").as_double(), 5);
}

// The hosts beside the partners: one holding its subscribers back by its own limit first,
// whatever the others' traffic; what is not known yet is null.
TEST(LivePage, PartnersJsonListsTheHostsHoldingSubscribersBackFirst) {
  const std::vector<origin_snapshot> hosts{
      {.origin = "https://busy.test:443", .subscribers = 40, .in_flight = 900, .limit = 1024},
      {.origin = "https://queueing.test:443",
       .subscribers = 3,
       .rate_limit = 30,
       .in_flight = 8,
       .limit = 8,
       .need = 20,
       .waiting_for_origin = 2,
       .best_latency = 0.2,
       .usual_latency = 0.25,
       .acceptable_latency = 0.5,
       .judged_by_usual = true},
  };
  const auto parsed = json::parse(partners_json({}, hosts, 1020));
  const auto& listed = parsed.at("hosts").as_array();
  ASSERT_EQ(listed.size(), 2u);
  const auto& first = listed[0].as_object();
  EXPECT_EQ(first.at("origin").as_string(), "https://queueing.test:443");
  EXPECT_EQ(first.at("waiting_for_host").as_int64(), 2);
  EXPECT_EQ(first.at("need").as_int64(), 20);
  EXPECT_EQ(first.at("acceptable_latency").as_double(), 0.5);
  EXPECT_TRUE(first.at("judged_by_usual").as_bool());
  const auto& second = listed[1].as_object();
  EXPECT_EQ(second.at("in_flight").as_int64(), 900);
  EXPECT_TRUE(second.at("need").is_null());
  EXPECT_TRUE(second.at("best_latency").is_null());
}

TEST(LivePage, ThePageReadsPartnersJsonAndWritesTextNotMarkup) {
  const auto& page = live_page_html();
  EXPECT_NE(page.find("fetch(\"partners.json\""), std::string::npos);
  EXPECT_NE(page.find("view.hosts"), std::string::npos);
  EXPECT_EQ(page.find("innerHTML"), std::string::npos);
  EXPECT_EQ(page.find("http://"), std::string::npos) << "the page must load nothing from outside";
}

TEST(Metrics, EachPartnersStateAndEtaAreSeriesBesideTheHeldRows) {
  drain_metrics metrics(1);
  metrics.retry_max_age_seconds = 3600;
  drain_metrics::shard_view view;
  view.subscribers.push_back(
      {.id = 1, .delivered = 10, .rate_limit = 2, .paced_rate = 2, .achieved_rate = 2});
  view.subscribers.push_back({.id = 2, .failed = 3, .rate_limit = 2, .paced_rate = 2});
  view.held.push_back({.id = 2, .kind = "deactivated", .reason = "answered 410 Gone"});
  metrics.publish(0, view);
  metrics.publish_queue({.subscribers = {{.id = 1, .queued = 40}, {.id = 2, .queued = 9}}});
  const auto text = metrics_text(metrics, 10);
  EXPECT_NE(text.find("surge_subscriber_state{subscriber=\"1\",state=\"at_limit\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("surge_subscriber_state{subscriber=\"2\",state=\"deactivated\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("surge_subscriber_held{subscriber=\"2\",reason=\"deactivated\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("surge_subscriber_eta_seconds{subscriber=\"1\"} 20\n"), std::string::npos);
  EXPECT_EQ(text.find("surge_subscriber_eta_seconds{subscriber=\"2\"}"), std::string::npos);
  EXPECT_NE(text.find("surge_held_rows 9\n"), std::string::npos);
  EXPECT_NE(text.find("surge_eta_seconds 20\n"), std::string::npos);
  EXPECT_NE(text.find("surge_retry_max_age_seconds 3600\n"), std::string::npos);
  EXPECT_NE(text.find("surge_subscriber_achieved_rate{subscriber=\"1\"} 2\n"), std::string::npos);
}

}  // namespace
}  // namespace surge::engine
