// What an operator sees of a running drain: /metrics and /healthz, the terminal status line,
// JSON logs.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json/parse.hpp>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "tests/support/e2e.hpp"
#include "tests/support/http_get.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;

// name{labels} -> value, for every sample line of a Prometheus text exposition.
std::map<std::string, double> parse_exposition(const std::string& text) {
  std::map<std::string, double> samples;
  std::istringstream in(text);
  std::string line;
  const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})?) (\S+)$)");
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::smatch match;
    EXPECT_TRUE(std::regex_match(line, match, sample)) << "not a sample line: " << line;
    if (match.size() == 4) samples[match[1]] = std::stod(match[3]);
  }
  return samples;
}

struct slow_queue {
  temp_dir dir;
  test_queue queue{dir};
  sink_process sink{dir, queue.path(), {.behaviours_json = R"({"*": {"delay_ms": 100}})"}};
  explicit slow_queue(int rows) {
    for (int i = 0; i < 3; ++i) {
      const auto id = queue.add_subscriber_at(sink, 50, 5);
      queue.add_rows(id, rows);
    }
  }
};

TEST(DrainObservability, MetricsAreScrapedAndParsedDuringADrain) {
  slow_queue env(150);
  tools::child_process drain(
      surge_binary(),
      {"drain", "--db", env.queue.path(), "--allow-private-targets", "--until-drained",
       "--metrics-listen", "127.0.0.1:0", "--metrics-subscribers", "2", "--progress", "off"},
      env.dir.file("drain.out"), env.dir.file("drain.err"));
  const auto port = metrics_port_from_log(env.dir.file("drain.err"));
  ASSERT_NE(port, 0) << "no metrics address in the log";

  // Mid-drain: deliveries counted, and the per-subscriber series, chosen once their
  // subscribers have delivered. Waited for until two have series and 30 rows are done, when each
  // of the three has delivered (a few rows of its burst each): a bound of 2 is then the bound,
  // not one subscriber still waiting for its first delivery.
  const auto per_subscriber_series = [](const std::map<std::string, double>& samples) {
    int count = 0;
    for (const auto& [name, value] : samples) {
      if (name.rfind("surge_subscriber_delivered_total{", 0) == 0) ++count;
    }
    return count;
  };
  std::map<std::string, double> samples;
  ASSERT_TRUE(eventually(
      [&] {
        const auto page = http_get(port, "/metrics");
        if (page.status != 200) return false;
        samples = parse_exposition(page.body);
        const auto done = samples.find("surge_deliveries_total{outcome=\"done\"}");
        return per_subscriber_series(samples) >= 2 && done != samples.end() && done->second >= 30;
      },
      20s, 100ms))
      << "not two per-subscriber series and 30 deliveries while draining";
  const auto health = http_get(port, "/healthz");
  EXPECT_EQ(health.status, 200) << health.body;
  for (const char* name :
       {"surge_deliveries_total{outcome=\"done\"}", "surge_attempts_total{class=\"2xx\"}",
        "surge_in_flight_requests", "surge_in_flight_limit", "surge_buffered_rows",
        "surge_open_connections", "surge_backlog_rows", "surge_oldest_due_age_seconds",
        "surge_lost_leases_total", "surge_token_wait_seconds_total", "surge_subscribers_paused",
        "surge_attempt_duration_seconds_count", "surge_due_lag_seconds_count",
        "surge_claim_batch_rows_count", "surge_commit_batch_rows_count",
        "surge_claim_duration_seconds_sum", "surge_commit_duration_seconds_sum"}) {
    EXPECT_EQ(samples.count(name), 1u) << name << " missing";
  }
  EXPECT_GT(samples.at("surge_deliveries_total{outcome=\"done\"}"), 0);
  // Each shard's adaptive limit starts at 16 and never passes the shards' --max-in-flight.
  EXPECT_GE(samples.at("surge_in_flight_limit"), 8);
  EXPECT_LE(samples.at("surge_in_flight_limit"), 4096);
  EXPECT_GT(samples.at("surge_open_connections"), 0);
  // Histogram buckets are cumulative and end at the count.
  double previous = 0;
  for (const char* le : {"0.001", "0.01", "0.1", "1", "10", "+Inf"}) {
    const double value =
        samples.at(std::string("surge_attempt_duration_seconds_bucket{le=\"") + le + "\"}");
    EXPECT_GE(value, previous);
    previous = value;
  }
  EXPECT_EQ(previous, samples.at("surge_attempt_duration_seconds_count"));
  // Per-subscriber series are bounded by --metrics-subscribers.
  EXPECT_EQ(per_subscriber_series(samples), 2);

  std::this_thread::sleep_for(1000ms);
  const auto later = parse_exposition(http_get(port, "/metrics").body);
  EXPECT_GT(later.at("surge_deliveries_total{outcome=\"done\"}"),
            samples.at("surge_deliveries_total{outcome=\"done\"}"));
  ASSERT_EQ(drain.wait(60s).value_or(-1), 0);
}

TEST(DrainObservability, StatusLineOnATerminalAndPlainLogLinesOtherwise) {
  slow_queue env(60);
  int master = -1;
  const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string binary = surge_binary();
    const std::string db = env.queue.path();
    execl(binary.c_str(), binary.c_str(), "drain", "--db", db.c_str(), "--allow-private-targets",
          "--until-drained", static_cast<char*>(nullptr));
    _exit(127);
  }
  std::string screen;
  char buffer[4096];
  while (true) {
    pollfd fd{master, POLLIN, 0};
    if (::poll(&fd, 1, 30000) <= 0) break;
    const auto n = ::read(master, buffer, sizeof buffer);
    if (n <= 0) break;
    screen.append(buffer, static_cast<std::size_t>(n));
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(master);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << screen;
  // Redrawn in place: carriage return, clear line, the status.
  EXPECT_NE(screen.find("\r\033[Ksurge: backlog "), std::string::npos) << screen;
  EXPECT_NE(screen.find("delivered/s"), std::string::npos);
  EXPECT_NE(screen.find("ETA "), std::string::npos);
  EXPECT_NE(screen.find("| held 0 (0 partners) |"), std::string::npos) << screen;
  EXPECT_NE(screen.find("| unhappy: none |"), std::string::npos) << screen;
  EXPECT_EQ(screen.find("progress: "), std::string::npos) << "log lines instead of a status line";
  EXPECT_NE(screen.find("summary: delivered=180"), std::string::npos) << screen;

  // Not a terminal: plain progress log lines, no escape sequences.
  slow_queue plain(60);
  const auto result =
      run_surge(plain.dir, {"drain", "--db", plain.queue.path(), "--allow-private-targets",
                            "--until-drained", "--progress-interval", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("progress: delivered="), std::string::npos) << result.err;
  EXPECT_TRUE(std::regex_search(result.err, std::regex(R"(held=0 eta=[-:0-9]+ unhappy=none)")))
      << result.err;
  EXPECT_EQ(result.err.find("\033["), std::string::npos);
}

TEST(DrainObservability, JsonLogsAreOneObjectPerLine) {
  slow_queue env(10);
  const auto result =
      run_surge(env.dir, {"drain", "--db", env.queue.path(), "--allow-private-targets",
                          "--until-drained", "--log-format", "json", "--progress-interval", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::istringstream lines(result.err);
  std::string line;
  int parsed = 0;
  while (std::getline(lines, line)) {
    const auto object = boost::json::parse(line).as_object();
    EXPECT_TRUE(object.contains("time"));
    EXPECT_TRUE(object.contains("level"));
    EXPECT_TRUE(object.contains("message"));
    ++parsed;
  }
  EXPECT_GE(parsed, 2);  // at least the start and stop lines
}

}  // namespace
}  // namespace surge::testing
