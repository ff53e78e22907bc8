// The partner's own limiter is the judge: nginx `limit_req` set to exactly
// each subscriber's published rate and burst must refuse nothing, and every row goes (how near
// its rate a backlogged subscriber stays is proved on a simulated clock, in
// tests/engine/limits/). nginx's `burst=b-1 nodelay` admits b requests
// at once and then one per interval, measured from the arrival of the first: a bucket of
// capacity b, charged when a request arrives.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "tests/support/e2e.hpp"
#include "tests/support/nginx.hpp"

namespace surge::testing {
namespace {

struct partner {
  std::int64_t id = 0;
  int rate = 0;
  int burst = 0;
  int rows = 0;
};

// `return` runs in the rewrite phase, before limit_req's preaccess phase, so a limited location
// must answer from a later phase: try_files (precontent) falls through to a named location that
// answers 204.
std::string nginx_conf(const temp_dir& dir, std::uint16_t port,
                       const std::vector<partner>& partners) {
  const auto root = dir.file("nginx");
  std::ostringstream conf;
  conf << nginx_conf_prelude(root) << "  log_format partner '$msec $uri $status';\n"
       << "  access_log " << root << "/access.log partner;\n";
  std::set<int> rates;
  for (const auto& p : partners) rates.insert(p.rate);
  for (int rate : rates) {
    conf << "  limit_req_zone $uri zone=r" << rate << ":1m rate=" << rate << "r/s;\n";
  }
  conf << "  server {\n    listen 127.0.0.1:" << port << ";\n    root " << root << "/www;\n"
       << "    location = /ready { return 204; }\n"
       << "    location @accepted { return 204; }\n";
  for (const auto& p : partners) {
    conf << "    location = /s/" << p.id << " { limit_req zone=r" << p.rate
         << " burst=" << p.burst - 1 << " nodelay; limit_req_status 429; "
         << "try_files /none @accepted; }\n";
  }
  conf << "  }\n}\n";
  return conf.str();
}

struct logged_request {
  double at = 0;
  std::int64_t subscriber_id = 0;
  int status = 0;
};

std::vector<logged_request> read_access_log(const std::string& path) {
  std::vector<logged_request> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    logged_request request;
    std::string uri;
    fields >> request.at >> uri >> request.status;
    if (uri.rfind("/s/", 0) != 0) continue;
    request.subscriber_id = std::stoll(uri.substr(3));
    out.push_back(request);
  }
  return out;
}

TEST(DrainPartnerLimit, NginxLimitReqAtThePublishedLimitRefusesNothing) {
  const auto nginx = nginx_binary();
  if (!nginx) GTEST_SKIP() << "nginx is not installed (Debian package nginx-light)";
  temp_dir dir;
  std::filesystem::create_directories(dir.file("nginx/www"));
  test_queue queue(dir);
  const auto port = unused_port();

  // Every rate with a small and a larger burst, three partners each: enough rows for about five
  // seconds of sending after the first burst.
  constexpr double backlog_seconds = 5.0;
  std::vector<partner> partners;
  for (int copy = 0; copy < 3; ++copy) {
    for (int rate : {2, 5, 10, 20}) {
      for (int burst : {2, 5}) {
        partner p{
            .rate = rate, .burst = burst, .rows = burst + static_cast<int>(rate * backlog_seconds)};
        p.id = queue.add_subscriber("http://placeholder/", rate, burst);
        partners.push_back(p);
      }
    }
  }
  for (const auto& p : partners) {
    queue.set_url(p.id, "http://127.0.0.1:" + std::to_string(port) + "/s/" + std::to_string(p.id));
    queue.add_rows(p.id, p.rows);
  }
  { std::ofstream(dir.file("nginx/nginx.conf")) << nginx_conf(dir, port, partners); }
  // A partner has its own machine; here it shares two cores with the drain and whatever else
  // runs, and a partner stalled for longer than the margin stamps a batch of requests late and
  // the next on time, refusing it whoever the client is. So it runs at a higher priority where
  // that is allowed (GNU nice runs it unchanged, with a warning, where it is not).
  auto server = start_nginx(*nginx, dir.file("nginx"), port, "/ready", {"-n", "-10"});

  const auto result = run_surge(dir, {"drain", "--db", queue.path(), "--until-drained",
                                      "--allow-private-targets", "--progress-interval", "0"});
  server.stop();
  ASSERT_EQ(result.exit_code, 0) << result.err;

  std::map<std::int64_t, std::vector<logged_request>> by_subscriber;
  for (const auto& request : read_access_log(dir.file("nginx/access.log"))) {
    by_subscriber[request.subscriber_id].push_back(request);
  }
  int refused = 0;
  int total = 0;
  for (const auto& p : partners) {
    auto& requests = by_subscriber[p.id];
    std::sort(requests.begin(), requests.end(),
              [](const auto& a, const auto& b) { return a.at < b.at; });
    std::vector<double> accepted;
    std::string refusals;
    for (const auto& request : requests) {
      ++total;
      if (request.status == 204) {
        accepted.push_back(request.at);
      } else {
        ++refused;
        std::ostringstream at;
        at << " " << request.status << " at +" << (request.at - requests.front().at) << " s";
        refusals += at.str();
      }
    }
    const std::string label = "subscriber " + std::to_string(p.id) + " (" + std::to_string(p.rate) +
                              "/s, burst " + std::to_string(p.burst) + ")";
    // The strict property: the partner's limiter never had to refuse.
    EXPECT_TRUE(refusals.empty()) << label << " refused:" << refusals;
    EXPECT_EQ(static_cast<int>(accepted.size()), p.rows) << label;
  }
  EXPECT_EQ(refused, 0) << "nginx refused " << refused << " of " << total << " requests";
  EXPECT_EQ(queue.count_by_status()["done"], [&] {
    std::int64_t rows = 0;
    for (const auto& p : partners) rows += p.rows;
    return rows;
  }());
}

}  // namespace
}  // namespace surge::testing
