// The operator commands through the real binary on a real queue file: dead, audit, stats'
// lease holders.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <SQLiteCpp/Statement.h>

#include "proto/clock.hpp"
#include "storage/sqlite/claims.hpp"
#include "storage/sqlite/database.hpp"
#include "tests/support/backends.hpp"
#include "tests/support/e2e.hpp"
#include "tools/time_arg.hpp"

namespace surge::testing {
namespace {

void make_dead(test_queue& queue, std::int64_t id) {
  queue.sql().exec(
      "UPDATE webhook_delivery SET status = 'dead', attempts = 8, last_status = 500, "
      "last_error = 'attempt limit (HTTP 500)', next_attempt_at = 0 WHERE id = ?",
      {std::to_string(id)});
}

TEST(AdminCli, DeadListShowsNewestFirstAsJson) {
  temp_dir dir;
  test_queue queue(dir);
  const double now = proto::unix_now();
  const auto sub = queue.add_subscriber("https://a.example/h", 5, 10);
  const auto older = queue.add_rows(sub, 1, "{}", now - 7200)[0];
  const auto newer = queue.add_rows(sub, 1, "{}", now - 60)[0];
  queue.add_rows(sub, 1);  // pending: not listed
  make_dead(queue, older);
  make_dead(queue, newer);

  auto result = run_surge(dir, {"dead", "list", "--db", queue.path(), "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto rows = boost::json::parse(result.out).as_array();
  ASSERT_EQ(rows.size(), 2u);
  const auto& first = rows[0].as_object();
  EXPECT_EQ(first.at("id").as_int64(), newer);
  EXPECT_EQ(first.at("subscriber_id").as_int64(), sub);
  EXPECT_EQ(first.at("event_type").as_string(), "video.trending");
  EXPECT_EQ(first.at("attempts").as_int64(), 8);
  EXPECT_EQ(first.at("last_status").as_int64(), 500);
  EXPECT_EQ(first.at("last_error").as_string(), "attempt limit (HTTP 500)");
  EXPECT_NEAR(first.at("created_at").to_number<double>(), now - 60, 0.01);
  EXPECT_EQ(rows[1].at("id").as_int64(), older);

  result = run_surge(dir, {"dead", "list", "--db", queue.path(), "--limit", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("attempt limit (HTTP 500)"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("newest 1 shown"), std::string::npos) << result.out;
}

// `surge dead` and `surge audit` on both kinds of queue.
class AdminCliOn : public ::testing::TestWithParam<backend> {};

TEST_P(AdminCliOn, DeadReplayBySubscriberAndSince) {
  temp_dir dir;
  SURGE_QUEUE_FOR(GetParam(), dir, queue_held);
  test_queue& queue = *queue_held;
  const double now = proto::unix_now();
  const auto a = queue.add_subscriber("https://a.example/h", 5, 10);
  const auto b = queue.add_subscriber("https://b.example/h", 5, 10);
  const auto a_old = queue.add_rows(a, 1, "{}", now - 3 * 3600)[0];
  const auto a_new = queue.add_rows(a, 1, "{}", now - 600)[0];
  const auto b_new = queue.add_rows(b, 1, "{}", now - 600)[0];
  for (const auto id : {a_old, a_new, b_new}) make_dead(queue, id);

  auto result = run_surge(dir, {"dead", "replay", "--db", queue.path(), "--subscriber",
                                std::to_string(a), "--since", "-2h"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("replayed 1 "), std::string::npos) << result.out;
  auto row = queue.row(a_new);
  EXPECT_EQ(row.status, "pending");
  EXPECT_EQ(row.attempts, 0);
  EXPECT_EQ(row.locked_until, 0);
  EXPECT_EQ(queue.row(a_old).status, "dead");
  EXPECT_EQ(queue.row(b_new).status, "dead");
  const double due = queue.sql().number("SELECT next_attempt_at FROM webhook_delivery WHERE id = ?",
                                        {std::to_string(a_new)});
  EXPECT_NEAR(due, proto::unix_now(), 60);

  // An ISO-8601 time: 4 hours ago takes a's old row too; b is disabled, which the output says.
  ASSERT_EQ(
      run_surge(dir, {"subscriber", "disable", "--db", queue.path(), std::to_string(b)}).exit_code,
      0);
  result = run_surge(dir, {"dead", "replay", "--db", queue.path(), "--since",
                           tools::format_utc(now - 4 * 3600), "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto report = boost::json::parse(result.out).as_object();
  EXPECT_EQ(report.at("replayed").as_int64(), 2);
  ASSERT_EQ(report.at("inactive_subscribers").as_array().size(), 1u);
  EXPECT_EQ(report.at("inactive_subscribers").as_array()[0].as_int64(), b);
  EXPECT_EQ(queue.row(a_old).status, "pending");
  EXPECT_EQ(queue.row(a_old).attempts, 0);
  EXPECT_EQ(queue.count_by_status().count("dead"), 0u);

  // No filter: every dead row, and the count is printed even when it is 0.
  make_dead(queue, b_new);
  result = run_surge(dir, {"dead", "replay", "--db", queue.path()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("replayed 1 "), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("inactive"), std::string::npos) << result.out;
  result = run_surge(dir, {"dead", "replay", "--db", queue.path()});
  EXPECT_NE(result.out.find("replayed 0 "), std::string::npos) << result.out;
}

// `dead show ID` prints one dead row in full; `dead replay --id` replays exactly those rows.
TEST_P(AdminCliOn, DeadShowAndReplayById) {
  temp_dir dir;
  SURGE_QUEUE_FOR(GetParam(), dir, queue_held);
  test_queue& queue = *queue_held;
  const double now = proto::unix_now();
  const auto a = queue.add_subscriber("https://a.example/h", 5, 10);
  const auto rows = queue.add_rows(a, 5, R"({"video":"v42"})", now - 600);
  for (const auto id : rows) make_dead(queue, id);
  const auto pending = queue.add_rows(a, 1)[0];

  auto result =
      run_surge(dir, {"dead", "show", "--db", queue.path(), std::to_string(rows[1]), "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto shown = boost::json::parse(result.out).as_object();
  EXPECT_EQ(shown.at("id").as_int64(), rows[1]);
  EXPECT_EQ(shown.at("subscriber_id").as_int64(), a);
  EXPECT_EQ(shown.at("event_type").as_string(), "video.trending");
  EXPECT_EQ(shown.at("attempts").as_int64(), 8);
  EXPECT_EQ(shown.at("last_status").as_int64(), 500);
  EXPECT_EQ(shown.at("last_error").as_string(), "attempt limit (HTTP 500)");
  EXPECT_NEAR(shown.at("created_at").to_number<double>(), now - 600, 0.01);
  EXPECT_TRUE(shown.at("finished_at").is_null()) << "no attempt was recorded";
  EXPECT_EQ(shown.at("payload").as_string(), R"({"video":"v42"})");
  EXPECT_EQ(shown.at("payload_bytes").as_int64(), 15);

  result = run_surge(dir, {"dead", "show", "--db", queue.path(), std::to_string(rows[1])});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("attempt limit (HTTP 500)"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find(R"({"video":"v42"})"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find(tools::format_utc(now - 600)), std::string::npos) << result.out;

  // Not dead, and not there: exit 1 saying which.
  result = run_surge(dir, {"dead", "show", "--db", queue.path(), std::to_string(pending)});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("is not dead"), std::string::npos) << result.err;
  result = run_surge(dir, {"dead", "show", "--db", queue.path(), "999999"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("no delivery 999999"), std::string::npos) << result.err;

  // --id repeated and as a list: exactly those rows.
  result = run_surge(dir, {"dead", "replay", "--db", queue.path(), "--id", std::to_string(rows[0]),
                           "--id", std::to_string(rows[2]) + "," + std::to_string(rows[3])});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("replayed 3 "), std::string::npos) << result.out;
  EXPECT_EQ(queue.row(rows[0]).status, "pending");
  EXPECT_EQ(queue.row(rows[1]).status, "dead");
  EXPECT_EQ(queue.row(rows[2]).status, "pending");
  EXPECT_EQ(queue.row(rows[3]).status, "pending");
  EXPECT_EQ(queue.row(rows[4]).status, "dead");
  result = run_surge(dir, {"dead", "replay", "--db", queue.path(), "--id", "x"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("--id"), std::string::npos) << result.err;
}

INSTANTIATE_TEST_SUITE_P(Backends, AdminCliOn, all_backends(), backend_name);

TEST(AdminCli, DeadRejectsBadArguments) {
  temp_dir dir;
  test_queue queue(dir);
  for (const char* since : {"yesterday", "2026-11-21T06:00:00", "-2x", "2026-13-01"}) {
    const auto result = run_surge(dir, {"dead", "replay", "--db", queue.path(), "--since", since});
    EXPECT_EQ(result.exit_code, 2) << since;
    EXPECT_NE(result.err.find("--since"), std::string::npos) << result.err;
  }
  auto result = run_surge(dir, {"dead", "list", "--db", queue.path(), "--subscriber", "3-1"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("--subscriber"), std::string::npos) << result.err;
  result = run_surge(dir, {"dead", "list", "--db", queue.path(), "--limit", "0"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(run_surge(dir, {"dead", "--db", queue.path()}).exit_code, 2);
}

// Hand-filled surge_attempt rows for the audit.
class attempt_filler {
 public:
  explicit attempt_filler(test_queue& queue) : sql_(queue.sql()) {}
  void add(std::int64_t subscriber, double started, double latency, int status = 200) {
    sql_.exec(
        "INSERT INTO surge_attempt(delivery_id, subscriber_id, attempt, started_at, "
        "finished_at, status_code, error_class) VALUES (?, ?, 1, ?, ?, ?, NULL)",
        {std::to_string(++delivery_), std::to_string(subscriber), number(started),
         number(started + latency), std::to_string(status)});
  }

 private:
  static std::string number(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", value);
    return text;
  }
  sql_client& sql_;
  std::int64_t delivery_ = 0;
};

// On both kinds of queue: the audit's reads differ, its judgement must not.
class AdminAudit : public ::testing::TestWithParam<backend> {
 protected:
  void SetUp() override {
    postgres_server* server = nullptr;
    if (GetParam() == backend::postgres) {
      std::string why_not;
      server = postgres_server::shared(&why_not);
      if (server == nullptr) GTEST_SKIP() << why_not;
    }
    queue_holder_ = make_test_queue(GetParam(), dir_, server);
    // Conforming: burst 10 at once, then 5/s for 40 s; latencies 1..100 ms over the first 100.
    good_ = queue().add_subscriber("https://good.example/h", 5, 10);
    attempt_filler fill(queue());
    int n = 0;
    for (int i = 0; i < 10; ++i) fill.add(good_, start_, ++n / 1000.0);
    for (int i = 1; i <= 200; ++i) {
      const int latency_ms = n < 100 ? ++n : 50;
      fill.add(good_, start_ + i * 0.2, latency_ms / 1000.0, i % 20 == 0 ? 503 : 200);
    }
    // Over the limit: 30 requests within one second against burst 2 + 1/s.
    bad_ = queue().add_subscriber("https://bad.example/h", 1, 2);
    for (int i = 0; i < 30; ++i) fill.add(bad_, start_ + 5 + i * 0.03, 0.2);
  }

  temp_dir dir_;
  std::unique_ptr<test_queue> queue_holder_;
  test_queue& queue() { return *queue_holder_; }
  const double start_ = 1'795'000'000;
  std::int64_t good_ = 0, bad_ = 0;
};

TEST_P(AdminAudit, ConformingSubscriberPassesWithExitZero) {
  const auto result = run_surge(
      dir_, {"audit", "--db", queue().path(), "--subscriber", std::to_string(good_), "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const auto list = boost::json::parse(result.out).as_array();
  ASSERT_EQ(list.size(), 1u);
  const auto& a = list[0].as_object();
  EXPECT_EQ(a.at("subscriber_id").as_int64(), good_);
  EXPECT_EQ(a.at("attempts").as_int64(), 210);
  EXPECT_EQ(a.at("successes").as_int64(), 200);  // every 20th of the spaced ones got 503
  EXPECT_FALSE(a.at("violation").as_bool());
  EXPECT_LE(a.at("max_1s").as_int64(), a.at("allowed_1s").to_number<double>());
  EXPECT_DOUBLE_EQ(a.at("allowed_1s").to_number<double>(), 16);
  EXPECT_DOUBLE_EQ(a.at("allowed_60s").to_number<double>(), 311);
  EXPECT_NEAR(a.at("achieved_rate").to_number<double>(), 5, 1e-6);  // (210 - 10) / 40 s
  EXPECT_LE(a.at("worst_window").at("excess").to_number<double>(), 0);
  // Latencies: 1..100 ms once each, then 110 times 50 ms. Nearest rank over 210 values:
  // p50 is the 105th (50 ms), p90 the 189th (79 ms), p99 the 208th (98 ms). The tolerance is
  // what doubles near 1.8e9 s keep of a difference.
  const auto& latency = a.at("latency_seconds").as_object();
  EXPECT_NEAR(latency.at("p50").to_number<double>(), 0.050, 1e-6);
  EXPECT_NEAR(latency.at("p90").to_number<double>(), 0.079, 1e-6);
  EXPECT_NEAR(latency.at("p99").to_number<double>(), 0.098, 1e-6);
}

TEST_P(AdminAudit, OverLimitSubscriberIsFlaggedWithExitFour) {
  auto result = run_surge(dir_, {"audit", "--db", queue().path(), "--json"});
  ASSERT_EQ(result.exit_code, 4) << result.out << result.err;
  const auto list = boost::json::parse(result.out).as_array();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_FALSE(list[0].at("violation").as_bool());
  const auto& bad = list[1].as_object();
  EXPECT_EQ(bad.at("subscriber_id").as_int64(), bad_);
  EXPECT_TRUE(bad.at("violation").as_bool());
  EXPECT_EQ(bad.at("max_1s").as_int64(), 30);
  EXPECT_DOUBLE_EQ(bad.at("allowed_1s").to_number<double>(), 4);
  EXPECT_NEAR(bad.at("latency_seconds").at("p99").to_number<double>(), 0.2, 1e-6);

  result = run_surge(dir_, {"audit", "--db", queue().path()});
  EXPECT_EQ(result.exit_code, 4);
  EXPECT_NE(result.out.find("VIOLATION"), std::string::npos) << result.out;

  result = run_surge(dir_, {"audit", "--help"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_NE(result.out.find("4 at least one subscriber exceeded"), std::string::npos) << result.out;
}

TEST_P(AdminAudit, ChartIsAPng) {
  const std::string png = dir_.file("audit chart.png");
  const auto result = run_surge(dir_, {"audit", "--db", queue().path(), "--chart", png});
  ASSERT_EQ(result.exit_code, 4) << result.out << result.err;  // the chart does not hide it
  EXPECT_NE(result.out.find("chart: "), std::string::npos) << result.out;
  std::ifstream in(png, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 1000u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

TEST_P(AdminAudit, ChartWithoutGnuplotFailsClearly) {
  const std::string saved = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", dir_.file("nothing-here").c_str(), 1);  // the child inherits it
  const auto result =
      run_surge(dir_, {"audit", "--db", queue().path(), "--chart", dir_.file("c.png")});
  ::setenv("PATH", saved.c_str(), 1);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("gnuplot"), std::string::npos) << result.err;
}

INSTANTIATE_TEST_SUITE_P(Backends, AdminAudit, all_backends(), backend_name);

TEST(AdminCli, StatsNameWhoHoldsTheLeases) {
  temp_dir dir;
  test_queue queue(dir);
  const auto a = queue.add_subscriber("https://a.example/h", 5, 10);
  const auto b = queue.add_subscriber("https://b.example/h", 5, 10);
  queue.add_rows(a, 3);
  queue.add_rows(b, 4);
  const double now = proto::unix_now();
  storage::sqlite::claimer claims(queue.db(), "surge@test-host:4242");
  const std::vector<storage::subscriber_demand> demand = {{a, 2}};
  ASSERT_EQ(claims.claim(demand, now, 300).size(), 2u);
  // The steady-state drainer's lease: a whole-second now + 30.
  queue.db().exec("UPDATE webhook_delivery SET locked_until = " +
                  std::to_string(static_cast<long long>(now) + 300) +
                  " WHERE id IN (SELECT id FROM webhook_delivery WHERE subscriber_id = " +
                  std::to_string(b) + " LIMIT 3)");

  auto result = run_surge(dir, {"stats", "--db", queue.path(), "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto stats = boost::json::parse(result.out).as_object();
  EXPECT_EQ(stats.at("leased").as_int64(), 5);
  const auto& by = stats.at("leased_by").as_object();
  EXPECT_EQ(by.size(), 2u);
  EXPECT_EQ(by.at("surge@test-host:4242").as_int64(), 2);
  EXPECT_EQ(by.at("other").as_int64(), 3);
  EXPECT_EQ(stats.at("subscribers").as_array()[1].at("leased_by").at("other").as_int64(), 3);
  EXPECT_EQ(stats.at("dead").as_int64(), 0);

  result = run_surge(dir, {"stats", "--db", queue.path()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("leased by"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("surge@test-host:4242"), std::string::npos) << result.out;
}

// What the queue says of each subscriber's rows beside their counts: an inactive one's rows go
// nowhere, a deleted one's neither, a partner's announced pause and stopped keys hold them.
TEST(AdminCli, StatsSayWhatHoldsEachSubscribersRows) {
  temp_dir dir;
  test_queue queue(dir);
  const auto sendable = queue.add_subscriber("https://a.example/h", 5, 10);
  const auto disabled = queue.add_subscriber("https://b.example/h", 5, 10);
  const auto paused = queue.add_subscriber("https://c.example/h", 5, 10);
  for (const auto id : {sendable, disabled, paused}) queue.add_rows(id, 2);
  queue.add_rows(99, 1);  // a subscriber since deleted
  queue.db().exec("UPDATE webhook_subscriber SET active = 0 WHERE id = " +
                  std::to_string(disabled));
  const double now = proto::unix_now();
  queue.db().exec(
      "INSERT INTO surge_partner_quota(subscriber_id, form, quota, window_seconds, remaining, "
      "reset_at, seen_at, paced_rate, paced_burst, paced_until) VALUES (" +
      std::to_string(paused) + ", 'draft', 10, 60, 0, " + std::to_string(now + 120) + ", " +
      std::to_string(now) + ", 0, 1, " + std::to_string(now + 120) + ")");

  auto result = run_surge(dir, {"stats", "--db", queue.path(), "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::map<std::int64_t, std::string> states;
  const auto parsed = boost::json::parse(result.out);
  for (const auto& s : parsed.at("subscribers").as_array()) {
    states[s.at("subscriber_id").to_number<std::int64_t>()] = s.at("state").as_string().c_str();
  }
  EXPECT_EQ(states[sendable], "sendable");
  EXPECT_EQ(states[disabled], "inactive");
  EXPECT_EQ(states[99], "deleted");
  EXPECT_TRUE(states[paused].starts_with("paused 1")) << states[paused];

  result = run_surge(dir, {"stats", "--db", queue.path()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("  state\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("  inactive\n"), std::string::npos) << result.out;
}

TEST(AdminCli, DeadReplayGivesAFreshRetryWindow) {
  temp_dir dir;
  test_queue queue(dir);
  const double now = proto::unix_now();
  // Nothing listens there: every attempt fails, and a failure past the 24 h window is final.
  const auto sub =
      queue.add_subscriber("http://127.0.0.1:" + std::to_string(unused_port()) + "/h", 100, 10);
  const auto old = queue.add_rows(sub, 1, "{}", now - 2 * 86400)[0];
  make_dead(queue, old);

  auto result = run_surge(dir, {"dead", "replay", "--db", queue.path()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("fresh retry window"), std::string::npos) << result.out;
  const double created =
      queue.db()
          .execAndGet("SELECT created_at FROM webhook_delivery WHERE id = " + std::to_string(old))
          .getDouble();
  EXPECT_NEAR(created, proto::unix_now(), 60);

  // A first backoff of a minute: the retried row is not due again before the drain ends (with a
  // short one, a loaded machine may see it due at the end: drained except a row, exit 5).
  result = run_surge(dir,
                     {"drain", "--db", queue.path(), "--until-drained", "--allow-private-targets",
                      "--progress-interval", "0", "--retry-base", "60s"},
                     std::chrono::seconds(60));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto row = queue.row(old);
  EXPECT_EQ(row.status, "retry") << "the replayed row died again: " << row.last_error;
  EXPECT_EQ(row.attempts, 1);
}

TEST(AdminCli, SubscriberListRedactsCredentials) {
  temp_dir dir;
  test_queue queue(dir);
  const auto sub = queue.add_subscriber("https://a.example/h", 5, 10);
  queue.set_url(sub, "https://partner:hunter2@a.example/hook?token=s3cret&v=2");

  for (const bool json : {false, true}) {
    std::vector<std::string> args = {"subscriber", "list", "--db", queue.path()};
    if (json) args.push_back("--json");
    const auto result = run_surge(dir, args);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_EQ(result.out.find("hunter2"), std::string::npos) << result.out;
    EXPECT_EQ(result.out.find("partner:"), std::string::npos) << result.out;
    EXPECT_EQ(result.out.find("s3cret"), std::string::npos) << result.out;
    EXPECT_NE(result.out.find("https://***@a.example/hook?token=***&v=***"), std::string::npos)
        << result.out;
    if (json) {
      EXPECT_EQ(boost::json::parse(result.out).as_array()[0].at("url").as_string(),
                "https://***@a.example/hook?token=***&v=***");
    }
  }
  // A rate another program stored as text is no number: JSON gets null, not NaN.
  queue.db().exec("UPDATE webhook_subscriber SET rate_per_sec = 'fast' WHERE id = " +
                  std::to_string(sub));
  const auto result = run_surge(dir, {"subscriber", "list", "--db", queue.path(), "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  boost::system::error_code error;
  const auto parsed = boost::json::parse(result.out, error);
  ASSERT_FALSE(error) << result.out;
  EXPECT_TRUE(parsed.as_array()[0].at("rate_per_sec").is_null()) << result.out;
}

// The operator who follows the README never passes --json: a secret Surge made up is shown on
// standard error (standard output stays the id alone, for scripts) and can be read back.
TEST(AdminCli, AGeneratedSecretIsShownAndCanBeReadBack) {
  temp_dir dir;
  test_queue queue(dir);
  const auto added = run_surge(dir, {"subscriber", "add", "--db", queue.path(), "--url",
                                     "https://partner.example/hook", "--rate-per-minute", "600"});
  ASSERT_EQ(added.exit_code, 0) << added.err;
  const auto id = std::stoll(added.out);
  EXPECT_EQ(added.out, std::to_string(id) + "\n");
  const auto read = run_surge(dir, {"subscriber", "secret", "--db", queue.path(),
                                    added.out.substr(0, added.out.size() - 1)});
  ASSERT_EQ(read.exit_code, 0) << read.err;
  const auto secret = read.out.substr(0, read.out.size() - 1);
  EXPECT_GE(secret.size(), 16u) << read.out;
  EXPECT_NE(added.err.find("generated signing secret " + secret), std::string::npos) << added.err;

  const auto given =
      run_surge(dir, {"subscriber", "add", "--db", queue.path(), "--url",
                      "https://partner.example/hook", "--secret", "their-own-secret-1234"});
  ASSERT_EQ(given.exit_code, 0) << given.err;
  EXPECT_EQ(given.err.find("generated"), std::string::npos) << "a secret given is not echoed";
  const auto missing = run_surge(dir, {"subscriber", "secret", "--db", queue.path(), "999"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("no subscriber with id 999"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace surge::testing
