// A partner that enforces a quota and announces it, where a process is what is tested: nginx, a
// peer Surge did not write, whose `limit_req` enforces a rate while a static RateLimit-Policy
// announces it, counted at the receiver; and the latest announcement as `surge stats` shows it.
// The pacing rule is tested on a simulated clock (partner_quota_test.cpp), and the announced
// quota's way through the shard core to /metrics on the core's
// (ShardCorePartner.AnAnnouncedQuotaPacesWithoutARefusalAndIsPublished).
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "tests/support/backends.hpp"
#include "tests/support/e2e.hpp"
#include "tests/support/nginx.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;

// nginx cannot count what is left of a window, but it can announce a policy and enforce it:
// `limit_req` at 10 r/s (a burst of 5, so that a request delayed a millisecond on its way is not
// refused), and on /announced a RateLimit-Policy of 100 per 10 s. A policy alone reads as a full
// window from each answer: Surge, configured at 50/s, keeps to 99 per 10 s after its first
// request. /silent is the same limiter announcing nothing.
TEST(DrainPartnerQuota, NginxAnnouncingItsPolicyRefusesNothing) {
  const auto nginx = nginx_binary();
  if (!nginx) GTEST_SKIP() << "nginx is not installed (Debian package nginx-light)";
  temp_dir dir;
  const auto root = dir.file("nginx");
  std::filesystem::create_directories(root + "/www");
  test_queue queue(dir);
  const auto port = unused_port();
  const auto base = "http://127.0.0.1:" + std::to_string(port);
  const auto silent = queue.add_subscriber(base + "/silent", 50, 5);
  const auto announced = queue.add_subscriber(base + "/announced", 50, 5);
  for (const auto id : {silent, announced}) queue.add_rows(id, 400);
  {
    // `return` answers before limit_req runs: try_files falls through to a named location
    // (as in drain_partner_limit_test.cpp). An empty add_header value adds no field.
    std::ofstream conf(root + "/nginx.conf");
    conf << nginx_conf_prelude(root) << "  log_format partner '$msec $uri $status';\n"
         << "  access_log " << root << "/access.log partner;\n"
         << "  limit_req_zone $uri zone=quota:1m rate=10r/s;\n"
         << "  map $uri $policy { /announced '\"peak\";q=100;w=10'; default ''; }\n"
         << "  server {\n    listen 127.0.0.1:" << port << ";\n    root " << root << "/www;\n"
         << "    add_header RateLimit-Policy $policy always;\n"
         << "    location = /ready { return 204; }\n"
         << "    location @accepted { return 204; }\n"
         << "    location / { limit_req zone=quota burst=4 nodelay; limit_req_status 429; "
         << "try_files /none @accepted; }\n  }\n}\n";
  }
  auto server = start_nginx(*nginx, root, port, "/ready", {"-n", "-10"});
  const auto result = run_surge(dir, {"drain", "--db", queue.path(), "--allow-private-targets",
                                      "--duration", "22", "--progress", "off"});
  server.stop();
  ASSERT_EQ(result.exit_code, 0) << result.err;

  std::map<std::string, std::vector<std::pair<double, int>>> by_path;
  {
    std::ifstream log(root + "/access.log");
    std::string line;
    while (std::getline(log, line)) {
      std::istringstream fields(line);
      double at = 0;
      std::string uri;
      int status = 0;
      fields >> at >> uri >> status;
      by_path[uri].emplace_back(at, status);
    }
  }
  const auto refused = [](const std::vector<std::pair<double, int>>& requests) {
    return std::count_if(requests.begin(), requests.end(),
                         [](const auto& r) { return r.second == 429; });
  };
  EXPECT_GT(refused(by_path["/silent"]), 0) << "the unannounced limit was not hit";
  const auto& requests = by_path["/announced"];
  std::ostringstream refusals;
  for (const auto& [at, status] : requests) {
    if (status != 204) refusals << " " << status << " at +" << at - requests.front().first << " s";
  }
  EXPECT_EQ(refused(requests), 0) << refusals.str();
  std::vector<double> accepted;
  for (const auto& [at, status] : requests) {
    if (status == 204) accepted.push_back(at);
  }
  ASSERT_GE(accepted.size(), 100u);
  std::sort(accepted.begin(), accepted.end());
  // From the second request on (the first goes at once): never faster than 100 per 10 s. That
  // it keeps to at least 95 % of it is proved on a simulated clock (partner_quota_test.cpp); a
  // loaded machine could only make it slower here.
  const double per_second =
      static_cast<double>(accepted.size() - 2) / (accepted.back() - accepted[1]);
  EXPECT_LE(per_second, 10.5) << "faster than the announced policy";
}

// The wiring from a partner's announcement to `surge stats`, on one backend: what each kind of
// queue (seed000, seed001, PostgreSQL) records and reads is PartnerQuotasOn.* in
// tests/storage/partner_quotas_test.cpp.
TEST(DrainPartnerQuotaStats, TheLatestAnnouncementIsShownByStats) {
  temp_dir dir;
  SURGE_QUEUE_FOR(backend::sqlite, dir, queue);
  // A quota of 100 a day, announced as the draft says it: after the first burst, what is left
  // would not last the day at 50/s, so the rest of the rows wait (hence --duration).
  sink_process sink(dir, queue->path(),
                    {.behaviours_json = R"({"*": {"quota": {"requests": 100, "window_s": 86400, )"
                                        R"("announce": "draft"}}})"});
  const auto id = queue->add_subscriber_at(sink, 50, 5);
  queue->add_rows(id, 20);
  const auto drained = run_surge(dir, {"drain", "--db", queue->path(), "--allow-private-targets",
                                       "--duration", "3", "--progress", "off"});
  ASSERT_EQ(drained.exit_code, 0) << drained.err;
  const auto sent = static_cast<std::int64_t>(sink.stop_and_read().size());
  EXPECT_GE(sent, 1);
  EXPECT_LE(sent, 5);
  EXPECT_NE(drained.err.find("its partner announces"), std::string::npos) << drained.err;

  const auto stats = run_surge(dir, {"stats", "--db", queue->path(), "--json"});
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  const auto json = boost::json::parse(stats.out).as_object();
  const auto& announced = json.at("announced_quotas").as_array();
  ASSERT_EQ(announced.size(), 1u) << stats.out;
  const auto& entry = announced.at(0).as_object();
  EXPECT_EQ(entry.at("subscriber_id").to_number<std::int64_t>(), id);
  EXPECT_EQ(entry.at("form").as_string(), "ratelimit");
  EXPECT_EQ(entry.at("quota").to_number<std::int64_t>(), 100);
  EXPECT_EQ(entry.at("window_seconds").to_number<double>(), 86400);
  EXPECT_EQ(entry.at("remaining").to_number<std::int64_t>(), 100 - sent);
  EXPECT_EQ(entry.at("configured_rate").to_number<double>(), 50);
  // What is left for the rest of the day would not last at 50/s: the pace is far below it.
  EXPECT_TRUE(entry.at("paced").as_bool()) << stats.out;
  EXPECT_LT(entry.at("paced_rate").to_number<double>(), 1) << stats.out;
  const auto table = run_surge(dir, {"stats", "--db", queue->path()});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("100 per 86400 s"), std::string::npos) << table.out;
}

}  // namespace
}  // namespace surge::testing
