// Which partner is unhappy, and why, on one screen: the live page at / in a real headless
// browser, /partners.json, and the exit summary naming whose rows are left.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <filesystem>
#include <regex>
#include <thread>

#include "tests/support/e2e.hpp"
#include "tests/support/http_get.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;
namespace json = boost::json;

std::string chromium_binary() {
  for (const char* path : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (std::filesystem::exists(path)) return path;
  }
  return {};
}

// The page as the browser rendered it after running its script: the DOM, not the source.
std::string rendered_page(const temp_dir& dir, std::uint16_t port) {
  const auto browser = chromium_binary();
  if (browser.empty()) {
    ADD_FAILURE() << "chromium not found: tools/dev.sh installs the Debian package chromium";
    return {};
  }
  tools::child_process chromium(
      browser,
      {"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
       "--user-data-dir=" + dir.file("chromium-profile"), "--virtual-time-budget=4000",
       "--dump-dom", "http://127.0.0.1:" + std::to_string(port) + "/"},
      dir.file("dom.html"), dir.file("chromium.err"));
  EXPECT_EQ(chromium.wait(60s).value_or(-1), 0) << read_file(dir.file("chromium.err"));
  return read_file(dir.file("dom.html"));
}

std::string state_of(const json::value& view, std::int64_t id) {
  for (const auto& p : view.at("partners").as_array()) {
    if (p.at("subscriber").as_int64() == id) return std::string(p.at("state").as_string());
  }
  return "absent";
}

TEST(DrainPartnerView, ThePageTheJsonAndTheSummaryNameTheUnhappyPartnersAndWhy) {
  temp_dir dir;
  test_queue queue{dir};
  sink_process sink(dir, queue.path(), {.behaviours_json = R"({"2": {"status": 500},
                                                                "3": {"status": 410}})"});
  const auto healthy = queue.add_subscriber_at(sink, 20, 5);
  const auto failing = queue.add_subscriber_at(sink, 20, 5);
  const auto gone = queue.add_subscriber_at(sink, 20, 5);
  ASSERT_EQ(failing, 2);
  ASSERT_EQ(gone, 3);
  queue.add_rows(healthy, 400);  // 20 s at its limit: the page is read meanwhile
  queue.add_rows(failing, 50);
  queue.add_rows(gone, 30);
  tools::child_process drain(
      surge_binary(),
      {"drain", "--db", queue.path(), "--allow-private-targets", "--until-drained",
       "--metrics-listen", "127.0.0.1:0", "--progress", "off"},
      dir.file("drain.out"), dir.file("drain.err"));
  const auto port = metrics_port_from_log(dir.file("drain.err"));
  ASSERT_NE(port, 0) << read_file(dir.file("drain.err"));

  json::value view;
  ASSERT_TRUE(eventually(
      [&] {
        const auto reply = http_get(port, "/partners.json");
        if (reply.status != 200) return false;
        view = json::parse(reply.body);
        return state_of(view, failing) == "circuit_open" && state_of(view, gone) == "deactivated" &&
               state_of(view, healthy) == "at_limit" &&
               view.at("totals").at("held_rows").as_int64() > 0;
      },
      15s, 250ms))
      << json::serialize(view);
  for (const auto& p : view.at("partners").as_array()) {
    if (p.at("subscriber").as_int64() == failing) {
      EXPECT_NE(std::string(p.at("last_error").as_string()).find("500"), std::string::npos) << p;
      EXPECT_TRUE(p.at("held").as_bool());
    }
    if (p.at("subscriber").as_int64() == healthy) {
      EXPECT_TRUE(p.at("eta_seconds").is_number()) << p;
    }
  }

  const auto dom = rendered_page(dir, port);
  for (const auto& [id, state] :
       {std::pair{healthy, "at_limit"}, {failing, "circuit_open"}, {gone, "deactivated"}}) {
    const std::regex row("<tr data-subscriber=\"" + std::to_string(id) + "\" data-state=\"" +
                         state + "\"");
    EXPECT_TRUE(std::regex_search(dom, row))
        << "subscriber " << id << " not shown " << state << " on the page:\n"
        << dom;
  }
  EXPECT_NE(dom.find("backlog "), std::string::npos) << dom;
  // The sink is the one partner host, with what its limit measured of it.
  const auto& hosts = view.at("hosts").as_array();
  ASSERT_EQ(hosts.size(), 1u) << json::serialize(view);
  const std::string origin(hosts[0].at("origin").as_string());
  EXPECT_TRUE(origin.starts_with("http://127.0.0.1:")) << origin;
  EXPECT_TRUE(hosts[0].at("best_latency").is_number()) << hosts[0];
  EXPECT_NE(dom.find("<tr data-origin=\"" + origin + "\""), std::string::npos) << dom;
  EXPECT_NE(dom.find("410 Gone"), std::string::npos) << dom;

  // Held partners' rows are left, and the summary says whose and why.
  EXPECT_EQ(drain.wait(90s).value_or(-1), 5) << read_file(dir.file("drain.err"));
  const auto out = read_file(dir.file("drain.out"));
  EXPECT_TRUE(std::regex_search(
      out, std::regex(R"(left: subscriber 2: \d+ rows \(circuit_open: .*last error: http 500)")))
      << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(left: subscriber 3: \d+ rows \(deactivated: )")))
      << out;
  EXPECT_EQ(out.find("left: subscriber 1:"), std::string::npos) << out;
}

}  // namespace
}  // namespace surge::testing
