// The monitoring files Surge ships, tested with the real tools: promtool runs the alert rules'
// unit tests, every metric name the dashboard and the rules use must be one a real drain
// exports, and a real Prometheus server scrapes a real drain and evaluates the rules.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "tests/support/e2e.hpp"
#include "tests/support/http_get.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;
namespace json = boost::json;

const std::string alerts_file = SURGE_DIST_DIR "/surge-alerts.yml";
const std::string dashboard_file = SURGE_DIST_DIR "/surge-dashboard.json";

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

// The Debian package `prometheus` provides both; a machine without it skips, saying so.
std::optional<std::string> prometheus_tool(const std::string& name) {
  return tools::find_program(name);
}

run_result run_program(const temp_dir& dir, const std::string& program,
                       const std::vector<std::string>& args) {
  static int counter = 0;
  const std::string tag = "tool" + std::to_string(++counter);
  tools::child_process child(program, args, dir.file(tag + ".out"), dir.file(tag + ".err"));
  auto status = child.wait(60s);
  if (!status) status = child.stop(5s);
  return {*status, slurp(dir.file(tag + ".out")), slurp(dir.file(tag + ".err"))};
}

// A drain with --metrics-listen on port 0, delivering slowly (2/s) from a 400-row backlog to a
// sink, so every series, per-subscriber ones included, is exported while the test runs.
class running_drain {
 public:
  running_drain()
      : sink_(dir_, queue_.path()),
        drain_(surge_binary(),
               {"drain", "--db", prepare(), "--allow-private-targets", "--metrics-listen",
                "127.0.0.1:0", "--progress", "off", "--max-age", "120"},
               dir_.file("drain.out"), dir_.file("drain.err")) {
    const std::regex announced(R"(metrics on http://[0-9.]+:([0-9]+)/metrics)");
    for (int i = 0; i < 400 && port_ == 0; ++i) {
      std::smatch match;
      const std::string log = slurp(dir_.file("drain.err"));
      if (std::regex_search(log, match, announced))
        port_ = static_cast<std::uint16_t>(std::stoi(match[1]));
      else
        std::this_thread::sleep_for(25ms);
    }
  }
  std::uint16_t port() const { return port_; }
  const temp_dir& dir() const { return dir_; }
  tools::child_process& process() { return drain_; }

 private:
  std::string prepare() {
    const auto id = queue_.add_subscriber_at(sink_, 2, 2);
    queue_.add_rows(id, 400);
    return queue_.path();
  }

  temp_dir dir_;
  test_queue queue_{dir_};
  sink_process sink_;
  tools::child_process drain_;
  std::uint16_t port_ = 0;
};

// Sample names (the part before `{` or the value) of a text exposition.
// The names of the series in `exposition`; with `families`, also of every family it declares
// (`# TYPE`), which may have no series at the moment (no subscriber held, say).
std::set<std::string> exported_names(const std::string& exposition, bool families = false) {
  std::set<std::string> names;
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    if (families && line.starts_with("# TYPE ")) {
      const auto name = line.substr(7);
      names.insert(name.substr(0, name.find(' ')));
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    names.insert(line.substr(0, line.find_first_of("{ ")));
  }
  return names;
}

std::set<std::string> surge_names_in(const std::string& text) {
  std::set<std::string> names;
  const std::regex name(R"(\bsurge_[a-z0-9_]+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), name); it != std::sregex_iterator();
       ++it) {
    names.insert(it->str());
  }
  return names;
}

// Every PromQL string of a Grafana dashboard: panel targets and templating queries.
void collect_queries(const json::value& value, std::string& out) {
  if (value.is_object()) {
    for (const auto& [key, child] : value.as_object()) {
      if ((key == "expr" || key == "query" || key == "definition") && child.is_string()) {
        out += child.as_string();
        out += '\n';
      } else {
        collect_queries(child, out);
      }
    }
  } else if (value.is_array()) {
    for (const auto& child : value.as_array()) collect_queries(child, out);
  }
}

TEST(Monitoring, PromtoolChecksAndUnitTestsTheAlertRules) {
  const auto promtool = prometheus_tool("promtool");
  if (!promtool) GTEST_SKIP() << "promtool not found: install the Debian package prometheus";
  temp_dir dir;
  auto result = run_program(dir, *promtool, {"check", "rules", alerts_file});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  result =
      run_program(dir, *promtool, {"test", "rules", SURGE_MONITORING_DIR "/surge-alerts.test.yml"});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("SUCCESS"), std::string::npos) << result.out;
}

TEST(Monitoring, DashboardAndRulesUseOnlyMetricsADrainExports) {
  running_drain drain;
  ASSERT_NE(drain.port(), 0) << slurp(drain.dir().file("drain.err"));
  // Per-subscriber series need a delivery, the queue's a first sample: wait for both.
  std::set<std::string> exported;
  for (int i = 0; i < 100; ++i) {
    const auto text = http_get(drain.port(), "/metrics").body;
    exported = exported_names(text);
    if (exported.count("surge_subscriber_queued_rows") &&
        exported.count("surge_subscriber_delivered_total")) {
      exported = exported_names(text, true);
      break;
    }
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(exported.count("surge_subscriber_queued_rows")) << "no queue sample within 10 s";

  std::string queries;
  collect_queries(json::parse(slurp(dashboard_file)), queries);
  const auto dashboard_names = surge_names_in(queries);
  EXPECT_GE(dashboard_names.size(), 20u) << queries;
  for (const auto& name : dashboard_names) {
    EXPECT_TRUE(exported.count(name))
        << "the dashboard queries " << name << ", which no drain exports";
  }
  const auto rule_names = surge_names_in(slurp(alerts_file));
  EXPECT_GE(rule_names.size(), 8u);
  for (const auto& name : rule_names) {
    EXPECT_TRUE(exported.count(name))
        << "an alert rule uses " << name << ", which no drain exports";
  }
  EXPECT_EQ(drain.process().stop(20s), 0);
}

std::string url_encode(const std::string& text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

class prometheus_server {
 public:
  prometheus_server(const std::string& binary, const temp_dir& dir, std::uint16_t target_port)
      : port_(unused_port()) {
    const std::string config = dir.file("prometheus.yml");
    std::ofstream(config) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                          << "rule_files:\n  - " << alerts_file << "\n"
                          << "scrape_configs:\n  - job_name: surge\n    static_configs:\n"
                          << "      - targets: ['127.0.0.1:" << target_port << "']\n";
    process_.emplace(
        binary,
        std::vector<std::string>{
            "--config.file=" + config, "--storage.tsdb.path=" + dir.file("tsdb"),
            "--web.listen-address=127.0.0.1:" + std::to_string(port_), "--log.level=warn"},
        dir.file("prometheus.out"), dir.file("prometheus.err"));
  }
  ~prometheus_server() { process_->stop(10s); }
  bool ready() {
    for (int i = 0; i < 300; ++i) {
      if (http_get(port_, "/-/ready").status == 200) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }
  // The result vector of an instant query.
  json::array query(const std::string& promql) {
    const auto reply = http_get(port_, "/api/v1/query?query=" + url_encode(promql));
    if (reply.status != 200) return {};
    return json::parse(reply.body).at("data").at("result").as_array();
  }
  json::array alerts() {
    const auto reply = http_get(port_, "/api/v1/alerts");
    if (reply.status != 200) return {};
    return json::parse(reply.body).at("data").at("alerts").as_array();
  }

 private:
  std::uint16_t port_;
  std::optional<tools::child_process> process_;
};

double sample_value(const json::value& sample) {
  return std::stod(std::string(sample.at("value").as_array()[1].as_string()));
}

std::optional<json::object> find_alert(const json::array& alerts, const std::string& name) {
  for (const auto& alert : alerts) {
    if (alert.at("labels").at("alertname").as_string() == name) return alert.as_object();
  }
  return std::nullopt;
}

// Polls `probe` every 200 ms for up to 30 s.
template <typename Probe>
bool eventually(Probe probe) {
  for (int i = 0; i < 150; ++i) {
    if (probe()) return true;
    std::this_thread::sleep_for(200ms);
  }
  return false;
}

TEST(Monitoring, RealPrometheusScrapesADrainAndEvaluatesTheRules) {
  const auto binary = prometheus_tool("prometheus");
  if (!binary) GTEST_SKIP() << "prometheus not found: install the Debian package prometheus";
  running_drain drain;
  ASSERT_NE(drain.port(), 0) << slurp(drain.dir().file("drain.err"));
  temp_dir dir;
  prometheus_server prometheus(*binary, dir, drain.port());
  ASSERT_TRUE(prometheus.ready()) << slurp(dir.file("prometheus.err"));

  EXPECT_TRUE(eventually([&] {
    const auto up = prometheus.query(R"(up{job="surge"})");
    return up.size() == 1 && sample_value(up[0]) == 1;
  })) << "the drain was never scraped: "
      << slurp(dir.file("prometheus.err"));

  // 400 rows at 2/s: the subscriber has more than 100 queued for minutes, as the rule says.
  double queued = 0;
  EXPECT_TRUE(eventually([&] {
    const auto result =
        prometheus.query(R"(surge_subscriber_queued_rows{job="surge", subscriber="1"})");
    if (result.size() == 1) queued = sample_value(result[0]);
    return queued > 100;
  }));
  EXPECT_LE(queued, 400);
  EXPECT_TRUE(eventually([&] {
    const auto result =
        prometheus.query(R"(sum(rate(surge_deliveries_total{outcome="done"}[5s])))");
    return result.size() == 1 && sample_value(result[0]) > 0;
  })) << "no delivery rate";
  // The partner host's series, as the real server parsed them: the sink is one origin, its
  // best latency known once it answered.
  EXPECT_TRUE(eventually([&] {
    const auto result = prometheus.query(R"(surge_origin_best_latency_seconds{job="surge"})");
    return result.size() == 1 && sample_value(result[0]) > 0 && sample_value(result[0]) < 1 &&
           result[0].at("metric").at("origin").as_string().starts_with("http://127.0.0.1:");
  })) << json::serialize(prometheus.query("surge_origin_best_latency_seconds"));

  // 400 rows at 2/s take 200 s, longer than --max-age 120: SurgeSubscriberPastMaxAge has
  // `for: 10m`, so within seconds it is pending, naming the subscriber; SurgeDrainDown is not
  // there at all.
  std::optional<json::object> past;
  EXPECT_TRUE(eventually([&] {
    past = find_alert(prometheus.alerts(), "SurgeSubscriberPastMaxAge");
    return past.has_value();
  })) << json::serialize(prometheus.alerts());
  ASSERT_TRUE(past.has_value());
  EXPECT_EQ(past->at("state").as_string(), "pending");
  EXPECT_EQ(past->at("labels").at("subscriber").as_string(), "1");
  EXPECT_EQ(past->at("labels").at("severity").as_string(), "warning");
  const std::string summary(past->at("annotations").at("summary").as_string());
  EXPECT_TRUE(
      std::regex_search(summary, std::regex(R"(^Subscriber 1 needs \S.* to send its rows)")))
      << summary;
  EXPECT_FALSE(find_alert(prometheus.alerts(), "SurgeDrainDown"));

  // Stopped, the drain is down for Prometheus, and SurgeDrainDown starts its 2 minutes.
  EXPECT_EQ(drain.process().stop(20s), 0);
  EXPECT_TRUE(eventually([&] {
    const auto alert = find_alert(prometheus.alerts(), "SurgeDrainDown");
    return alert && alert->at("state").as_string() == "pending";
  })) << json::serialize(prometheus.alerts());
}

}  // namespace
}  // namespace surge::testing
