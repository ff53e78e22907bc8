// The `surge` program through its command line: exit codes, messages, --json output.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <boost/json/parse.hpp>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "tests/support/e2e.hpp"
#include "tests/support/shared_ddl.hpp"

namespace surge::testing {
namespace {

// The first command the runbook gives, on a queue only the steady-state drainer has used: it
// says what to run instead of quoting the database alone.
TEST(Cli, StatsOnAQueueSurgeHasNotMigratedSaysToRunMigrate) {
  temp_dir dir;
  const auto path = dir.file("theirs.db");
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec(shared_ddl);
  }
  auto result = run_surge(dir, {"stats", "--db", path});
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.err.find("Run `surge migrate --db " + path + "`"), std::string::npos)
      << result.err;
  ASSERT_EQ(run_surge(dir, {"migrate", "--db", path}).exit_code, 0);
  result = run_surge(dir, {"stats", "--db", path});
  EXPECT_EQ(result.exit_code, 0) << result.err;
}

// A URL that does not parse is named with the part that is wrong, never Boost.URL's error
// names ("mismatch", "leftover").
TEST(Cli, UrlErrorsNameThePartThatIsWrong) {
  temp_dir dir;
  test_queue queue(dir);
  for (const auto& [url, says] : std::vector<std::pair<std::string, std::string>>{
           {"htp:/x", "--url: 'htp:/x' is not an http:// or https:// URL"},
           {"http:/x", "--url: 'http:/x' does not start with http://"},
           {"https://", "--url: 'https://' has no host"},
           {"https://a.example:443x/h",
            "--url: 'https://a.example:443x/h' has characters after "
            "the port"},
           {"https://a example/h",
            "--url: 'https://a example/h' has a character not allowed in "
            "a host name (' ')"},
           {"https://user:pw@a.example/h", "--url: 'https://***@a.example/h' has user info"}}) {
    const auto result = run_surge(dir, {"subscriber", "add", "--db", queue.path(), "--url", url});
    EXPECT_EQ(result.exit_code, 2) << url << ": " << result.err;
    EXPECT_NE(result.err.find(says), std::string::npos) << url << ": " << result.err;
    EXPECT_EQ(result.err.find("mismatch"), std::string::npos) << result.err;
    EXPECT_EQ(result.err.find("leftover"), std::string::npos) << result.err;
    EXPECT_EQ(result.err.find(":pw@"), std::string::npos) << "a password is never shown";
  }
  const auto proxy = run_surge(dir, {"drain", "--db", queue.path(), "--proxy", "htp:/proxy"});
  EXPECT_EQ(proxy.exit_code, 2) << proxy.err;
  EXPECT_NE(proxy.err.find("--proxy: 'htp:/proxy' is not an http:// or https:// URL"),
            std::string::npos)
      << proxy.err;
}

TEST(Cli, UnknownCommandsAndFlagsExitWithTwoAndSaySo) {
  temp_dir dir;
  auto result = run_surge(dir, {"frobnicate"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("unknown command 'frobnicate'"), std::string::npos) << result.err;

  result = run_surge(dir, {"migrate", "--db", dir.file("q.db"), "--bogus"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("--bogus"), std::string::npos) << result.err;

  result = run_surge(dir, {"drain", "--db", dir.file("missing.db")});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("missing.db"), std::string::npos) << result.err;

  // Every command that needs an existing queue says so the same way: exit 2 with the path.
  const auto missing = dir.file("missing.db");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"stats", "--db", missing},
           {"dead", "list", "--db", missing},
           {"audit", "--db", missing},
           {"prune", "--db", missing, "--older-than", "1d"},
           {"emit", "--db", missing, "--type", "t", "--data", "{}"},
           {"subscriber", "list", "--db", missing},
           {"subscriber", "set", "--db", missing, "1", "--rate", "5"},
           {"subscriber", "secret", "--db", missing, "1"}}) {
    result = run_surge(dir, args);
    EXPECT_EQ(result.exit_code, 2) << args[0] << " " << args[1] << ": " << result.err;
    EXPECT_NE(result.err.find("missing.db"), std::string::npos) << args[0] << ": " << result.err;
    EXPECT_FALSE(std::filesystem::exists(missing)) << args[0] << " created the file";
  }

  test_queue queue(dir);
  result = run_surge(dir, {"drain", "--db", queue.path(), "--subscribers", "5-2"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("--subscribers"), std::string::npos) << result.err;

  // A typo in a spike's subscriber list is not an empty spike: it must not end "drained".
  const auto known = queue.add_subscriber("http://127.0.0.1:9/hook", 10, 1);
  result = run_surge(dir, {"drain", "--db", queue.path(), "--until-drained", "--subscribers",
                           std::to_string(known) + ",99,200-300"});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_NE(result.err.find("no subscriber of this queue: 99,200-300"), std::string::npos)
      << result.err;

  result = run_surge(dir, {"drain", "--db", queue.path(), "--lease", "5"});
  EXPECT_EQ(result.exit_code, 2) << "a lease shorter than two attempt timeouts is refused";

  result = run_surge(dir, {"drain", "--db", queue.path(), "--origin-latency-tolerance", "0.5"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("--origin-latency-tolerance"), std::string::npos) << result.err;

  result = run_surge(dir, {"drain", "--help"});
  EXPECT_EQ(result.exit_code, 0);
  for (const char* flag : {"--threads", "--subscribers", "--until-drained", "--duration",
                           "--max-in-flight", "--per-subscriber-in-flight", "--lease",
                           "--max-attempts", "--max-age", "--allow-private-targets", "--ca-file",
                           "--origin-latency-tolerance", "--origin-latency-slack"}) {
    EXPECT_NE(result.out.find(flag), std::string::npos) << flag << " missing from --help";
  }
}

// --subscriber and --subscribers are one flag wherever a list of subscribers is taken.
TEST(Cli, SubscriberAndSubscribersAreOneFlag) {
  temp_dir dir;
  test_queue queue(dir);
  const auto known = queue.add_subscriber("http://127.0.0.1:9/hook", 10, 1);
  for (const std::string flag : {"--subscriber", "--subscribers"}) {
    auto result = run_surge(dir, {"drain", "--db", queue.path(), "--until-drained", "--progress",
                                  "off", flag, std::to_string(known) + ",99"});
    EXPECT_EQ(result.exit_code, 2) << flag << ": " << result.err;
    EXPECT_NE(result.err.find("no subscriber of this queue: 99"), std::string::npos)
        << flag << ": " << result.err;
    result = run_surge(dir, {"drain", "--db", queue.path(), "--until-drained", "--progress", "off",
                             flag, "1,4,10-20"});
    EXPECT_EQ(result.exit_code, 2) << flag << ": " << result.err;
    for (const std::vector<std::string>& command :
         {std::vector<std::string>{"dead", "list"}, {"dead", "replay"}, {"audit"}}) {
      auto args = command;
      args.insert(args.end(), {"--db", queue.path(), "--json", flag, "1,4,10-20"});
      result = run_surge(dir, args);
      EXPECT_EQ(result.exit_code, 0) << command[0] << " " << flag << ": " << result.err;
      args.back() = "4-1";
      result = run_surge(dir, args);
      EXPECT_EQ(result.exit_code, 2) << command[0] << " " << flag << ": " << result.err;
    }
  }
}

// Hostile numbers are refused at the door with exit code 2 and a message naming the flag:
// CLI11's own range checks let NaN through, and a huge duration overflowed its conversion.
TEST(Cli, NonNumbersAndEmptyListsAreRefusedWithExitTwo) {
  temp_dir dir;
  test_queue queue(dir);
  const std::vector<std::string> drain{"drain", "--db", queue.path(), "--until-drained"};
  const std::vector<std::pair<std::string, std::string>> bad_drain_flags{
      {"--attempt-timeout", "nan"},
      {"--max-age", "nan"},
      {"--connect-timeout", "NaN"},
      {"--grace", "nan"},
      {"--duration", "nan"},
      {"--duration", "1e308"},
      {"--duration", "inf"},
      {"--lease", "nan"},
      {"--retry-base", "nan"},
      {"--retry-cap", "-nan"},
      {"--retry-after-cap", "nan"},
      {"--max-age", "0.5"},
      {"--until-drained-wait", "nan"},
      {"--progress-interval", "inf"},
      {"--origin-latency-tolerance", "nan"},
      {"--origin-latency-slack", "nan"},
      {"--origin-latency-slack", "-0.001"},
      {"--circuit-max-cooldown", "nan"},
      {"--subscribers", ""},
      {"--metrics-listen", ":0"},
      {"--token-lease", "0"},
      {"--token-lease", "nan"}};
  for (const auto& [flag, value] : bad_drain_flags) {
    auto args = drain;
    args.push_back(flag);
    args.push_back(value);
    const auto result = run_surge(dir, args);
    EXPECT_EQ(result.exit_code, 2) << flag << " " << value << ": " << result.err;
    EXPECT_NE(result.err.find(flag), std::string::npos) << flag << ": " << result.err;
  }

  for (const char* rate : {"nan", "inf", "-1"}) {
    const auto result = run_surge(dir, {"subscriber", "add", "--db", queue.path(), "--url",
                                        "https://a.example/h", "--rate", rate});
    EXPECT_EQ(result.exit_code, 2) << rate << ": " << result.err;
    EXPECT_NE(result.err.find("--rate"), std::string::npos) << result.err;
  }
  const auto per_minute = run_surge(dir, {"subscriber", "add", "--db", queue.path(), "--url",
                                          "https://a.example/h", "--rate-per-minute", "nan"});
  EXPECT_EQ(per_minute.exit_code, 2) << per_minute.err;
  const auto secret =
      run_surge(dir, {"subscriber", "add", "--db", queue.path(), "--url", "https://a.example/h",
                      "--signing", "standard", "--secret", "notwhsec"});
  EXPECT_EQ(secret.exit_code, 2) << secret.err;
  EXPECT_EQ(queue.count_by_status().size(), 0u);
  EXPECT_EQ(queue.sql().number("SELECT COUNT(*) FROM webhook_subscriber"), 0)
      << "a refused subscriber was stored";

  // A rate another program stored as text: `set` names it instead of failing in SQL.
  const auto id = queue.add_subscriber("https://a.example/h", 5, 10);
  queue.db().exec("UPDATE webhook_subscriber SET rate_per_sec = 'fast' WHERE id = " +
                  std::to_string(id));
  auto set = run_surge(
      dir, {"subscriber", "set", "--db", queue.path(), std::to_string(id), "--burst", "3"});
  EXPECT_EQ(set.exit_code, 2) << set.err;
  EXPECT_NE(set.err.find("'fast'"), std::string::npos) << set.err;
  set = run_surge(dir,
                  {"subscriber", "set", "--db", queue.path(), std::to_string(id), "--rate", "2"});
  EXPECT_EQ(set.exit_code, 0) << set.err;
}

// Every duration flag takes a unit; a plain number stays seconds, as before.
TEST(Cli, DurationsTakeUnitsAndPlainNumbersStaySeconds) {
  temp_dir dir;
  test_queue queue(dir);
  const std::vector<std::string> drain{"drain",           "--db",       queue.path(),
                                       "--until-drained", "--progress", "off"};
  auto with = [&](std::vector<std::string> extra) {
    auto args = drain;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_surge(dir, args);
  };
  auto result = with({"--duration", "5s", "--grace", "10s", "--lease", "2m", "--idle-poll-min",
                      "5ms", "--idle-poll-max", "1.5s", "--max-age", "1d", "--retry-cap", "1h",
                      "--connect-timeout", "500ms", "--attempt-timeout", "30s"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  // The lease must be at least twice the attempt timeout plus a second: 121 s is, 2m is not,
  // which shows both the unit and the plain number were read as meant.
  result = with({"--attempt-timeout", "1m", "--lease", "121"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  result = with({"--attempt-timeout", "1m", "--lease", "2m"});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_NE(result.err.find("--lease must be at least"), std::string::npos) << result.err;
  for (const auto& [flag, value] :
       std::vector<std::pair<std::string, std::string>>{{"--lease", "4s"},
                                                        {"--lease", "2x"},
                                                        {"--grace", "-1s"},
                                                        {"--duration", "5 s"},
                                                        {"--idle-poll-min", "ms"},
                                                        {"--lease", "1e3"}}) {
    result = with({flag, value});
    EXPECT_EQ(result.exit_code, 2) << flag << " " << value << ": " << result.err;
    EXPECT_NE(result.err.find(flag), std::string::npos) << result.err;
    EXPECT_NE(result.err.find("'" + value + "'"), std::string::npos) << result.err;
  }

  // The subscriber's durations too, and prune's.
  auto added = run_surge(dir, {"subscriber", "add", "--db", queue.path(), "--url",
                               "https://a.example/h", "--batch", "10", "--batch-linger", "250ms",
                               "--coalesce", "/id", "--coalesce-window", "1m", "--json"});
  ASSERT_EQ(added.exit_code, 0) << added.err;
  const auto sub = boost::json::parse(added.out).as_object();
  EXPECT_DOUBLE_EQ(sub.at("batch_linger").to_number<double>(), 0.25);
  EXPECT_DOUBLE_EQ(sub.at("coalesce_window").to_number<double>(), 60);
  result = run_surge(dir, {"prune", "--db", queue.path(), "--older-than", "1.5h"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
}

TEST(Cli, MigrateWorksOnTheSharedDdlAndIsIdempotent) {
  temp_dir dir;
  const std::string path = dir.file("shared.db");
  {
    SQLite::Database raw(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    raw.exec(
        "CREATE TABLE webhook_subscriber (id INTEGER PRIMARY KEY, url TEXT NOT NULL, "
        "secret TEXT NOT NULL, event_types TEXT NOT NULL DEFAULT '*', rate_per_sec REAL "
        "NOT NULL DEFAULT 5.0, burst INTEGER NOT NULL DEFAULT 10, tokens REAL NOT NULL "
        "DEFAULT 10.0, tokens_updated_at REAL NOT NULL DEFAULT 0, active INTEGER NOT NULL "
        "DEFAULT 1)");
    raw.exec("INSERT INTO webhook_subscriber (url, secret) VALUES ('https://a.example/h', 's')");
  }
  // webhook_delivery is missing: migrate creates what is absent and keeps what is there, and
  // says what it added.
  auto result = run_surge(dir, {"migrate", "--db", path});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("schema version"), std::string::npos);
  EXPECT_NE(result.out.find("migrate: added tables surge_attempt, "), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("webhook_delivery"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("columns webhook_subscriber.signing, "), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("trigger"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find(" to " + path + "\n"), std::string::npos) << result.out;
  result = run_surge(dir, {"migrate", "--db", path});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("already current"), std::string::npos) << result.out;
  EXPECT_EQ(result.out.find("migrate:"), std::string::npos) << result.out;

  result = run_surge(dir, {"subscriber", "list", "--db", path, "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto list = boost::json::parse(result.out).as_array();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].at("signing").as_string(), "vvv");  // the new column's default
}

// A drain on a queue only the steady-state drainer has used logs what it adds to the schema.
TEST(Cli, DrainLogsWhatItAddsToTheSchema) {
  temp_dir dir;
  const std::string path = dir.file("shared.db");
  {
    SQLite::Database raw(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    raw.exec(shared_ddl);
  }
  auto result = run_surge(dir, {"drain", "--db", path, "--until-drained", "--progress", "off"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string log = result.out + result.err;
  EXPECT_NE(log.find("migrate: added tables surge_attempt, "), std::string::npos) << log;
  EXPECT_NE(log.find("columns webhook_delivery.last_status, "), std::string::npos) << log;
  EXPECT_NE(log.find(" to " + path + " (schema version 0 -> "), std::string::npos) << log;
  result = run_surge(dir, {"drain", "--db", path, "--until-drained", "--progress", "off"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ((result.out + result.err).find("migrate:"), std::string::npos) << result.err;
}

TEST(Cli, SubscriberEmitAndStatsWorkTogether) {
  temp_dir dir;
  const std::string db = dir.file("q.db");
  ASSERT_EQ(run_surge(dir, {"migrate", "--db", db}).exit_code, 0);

  auto added =
      run_surge(dir, {"subscriber", "add", "--db", db, "--url", "https://partner.example/hook",
                      "--events", "video.*", "--rate-per-minute", "120", "--burst", "4",
                      "--signing", "standard", "--json"});
  ASSERT_EQ(added.exit_code, 0) << added.err;
  const auto sub = boost::json::parse(added.out).as_object();
  EXPECT_DOUBLE_EQ(sub.at("rate_per_sec").to_number<double>(), 2.0);
  EXPECT_EQ(std::string(sub.at("secret").as_string()).rfind("whsec_", 0), 0u)
      << "a standard subscriber gets a generated whsec_ secret";

  auto other = run_surge(dir, {"subscriber", "add", "--db", db, "--url", "http://other.example/x",
                               "--events", "user.*"});
  ASSERT_EQ(other.exit_code, 0) << other.err;

  auto bad = run_surge(dir, {"subscriber", "add", "--db", db, "--url", "ftp://x.example/"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--url"), std::string::npos) << bad.err;

  auto emitted = run_surge(dir, {"emit", "--db", db, "--type", "video.trending", "--data",
                                 R"({"video":"v1"})", "--count", "5"});
  ASSERT_EQ(emitted.exit_code, 0) << emitted.err;
  EXPECT_NE(emitted.out.find("queued 5 "), std::string::npos) << emitted.out;  // one matches

  auto not_json =
      run_surge(dir, {"emit", "--db", db, "--type", "video.trending", "--data", "{not json"});
  EXPECT_EQ(not_json.exit_code, 2);

  auto stats = run_surge(dir, {"stats", "--db", db, "--json"});
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  const auto parsed = boost::json::parse(stats.out).as_object();
  EXPECT_EQ(parsed.at("pending").as_int64(), 5);
  EXPECT_EQ(parsed.at("due_now").as_int64(), 5);
  ASSERT_EQ(parsed.at("subscribers").as_array().size(), 1u);

  auto set = run_surge(dir, {"subscriber", "set", "--db", db, "1", "--rate", "7.5", "--url",
                             "https://moved.example/hook"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  auto after_set =
      boost::json::parse(run_surge(dir, {"subscriber", "list", "--db", db, "--json"}).out)
          .as_array()[0]
          .as_object();
  EXPECT_DOUBLE_EQ(after_set.at("rate_per_sec").to_number<double>(), 7.5);
  EXPECT_EQ(after_set.at("url").as_string(), "https://moved.example/hook");
  EXPECT_EQ(after_set.at("burst").as_int64(), 4) << "unset options keep their values";
  EXPECT_EQ(run_surge(dir, {"subscriber", "set", "--db", db, "99", "--rate", "1"}).exit_code, 1);
  EXPECT_EQ(run_surge(dir, {"subscriber", "set", "--db", db, "1", "--rate", "-1"}).exit_code, 2);

  ASSERT_EQ(run_surge(dir, {"subscriber", "disable", "--db", db, "1"}).exit_code, 0);
  auto listed = run_surge(dir, {"subscriber", "list", "--db", db, "--json"});
  EXPECT_FALSE(boost::json::parse(listed.out).as_array()[0].at("active").as_bool());
  EXPECT_EQ(run_surge(dir, {"subscriber", "enable", "--db", db, "99"}).exit_code, 1);
}

}  // namespace
}  // namespace surge::testing

namespace surge::testing {
namespace {

// Boost.JSON writes doubles as 2E1, 5E-1, 0E0; every --json output writes whole numbers as
// integers and the others in plain decimals.
TEST(Cli, JsonOutputsWriteNumbersPlainly) {
  temp_dir dir;
  test_queue queue(dir);
  const auto sub = queue.add_subscriber("https://a.example/h", 20, 10);
  queue.add_rows(sub, 3);
  auto added = run_surge(dir, {"subscriber", "add", "--db", queue.path(), "--url",
                               "https://b.example/h", "--rate", "0.5", "--json"});
  ASSERT_EQ(added.exit_code, 0) << added.err;
  EXPECT_TRUE(std::regex_search(added.out, std::regex(R"("rate_per_sec":0\.5[,}])"))) << added.out;
  const std::regex exponent("[0-9]E[-+]?[0-9]");
  for (const std::vector<std::string>& command : {std::vector<std::string>{"subscriber", "list"},
                                                  {"stats"},
                                                  {"dead", "list"},
                                                  {"audit"},
                                                  {"prune", "--older-than", "1d"},
                                                  {"dead", "replay"}}) {
    auto args = command;
    args.insert(args.end(), {"--db", queue.path(), "--json"});
    const auto result = run_surge(dir, args);
    EXPECT_EQ(result.exit_code, 0) << command[0] << ": " << result.err;
    EXPECT_FALSE(std::regex_search(result.out, exponent)) << command[0] << ": " << result.out;
    EXPECT_NO_THROW(boost::json::parse(result.out)) << result.out;
  }
  const auto listed = run_surge(dir, {"subscriber", "list", "--db", queue.path(), "--json"});
  EXPECT_TRUE(std::regex_search(listed.out, std::regex(R"("rate_per_sec":20[,}])"))) << listed.out;
}

// The README's main job: a demo spike drained end to end against a real sink process.
TEST(Cli, DemoDrainsASpikeEndToEnd) {
  temp_dir dir;
  const auto result = run_surge(dir, {"demo", "--dir", dir.file("demo")});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("(drained)"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("sink verdicts: ok="), std::string::npos) << result.out;
  EXPECT_EQ(result.out.find("bad="), std::string::npos) << "a signature failed to verify";
  // The spike's size is the one docs/cli.md gives.
  EXPECT_NE(result.out.find("demo: queued 6700 deliveries"), std::string::npos) << result.out;
  std::stringstream docs;
  docs << std::ifstream(SURGE_DIST_DIR "/../../docs/cli.md").rdbuf();
  EXPECT_NE(docs.str().find("queues 6,700 deliveries"), std::string::npos);
  // The table: subscriber, done, coalesced, dead, retry, pending, requests.
  std::map<std::int64_t, std::vector<long long>> table;
  std::istringstream lines(result.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::vector<long long> values;
    long long value = 0;
    while (fields >> value) values.push_back(value);
    if (values.size() == 7 && fields.eof()) table[values[0]] = values;
  }
  ASSERT_TRUE(table.contains(3) && table.contains(4)) << result.out;
  // The per-minute partner (4) took its 300 rank updates in batches of 50, in a handful of
  // requests.
  EXPECT_EQ(table[4][1], 300) << result.out;
  EXPECT_LE(table[4][6], 8) << result.out;
  // The cache warmer (3) needs one of each video's five rank updates: most of the other 240
  // were coalesced (only rows waiting together merge), and every row is done.
  EXPECT_EQ(table[3][1], 700) << result.out;
  EXPECT_GE(table[3][2], 180) << result.out;
  EXPECT_EQ(table[3][6], 700 - table[3][2]) << result.out;
}

// `sink --help` and docs/cli.md list the record's columns as the recorder writes them.
TEST(Cli, SinkHelpAndTheDocsListTheSameRecordColumns) {
  temp_dir dir;
  const auto result = run_surge(dir, {"sink", "--help"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  const std::string columns =
      "arrival,subscriber_id,delivery_id,attempt,verdict,status_sent,event_type,connection_id,"
      "sni,body_sha256,batch_size";
  std::string help = result.out;
  // CLI11 wraps long descriptions: compare without the wrapping.
  help = std::regex_replace(help, std::regex("\\s+"), "");
  EXPECT_NE(help.find(columns), std::string::npos) << result.out;
  std::stringstream docs;
  docs << std::ifstream(SURGE_DIST_DIR "/../../docs/cli.md").rdbuf();
  EXPECT_NE(docs.str().find("`" + columns + "`"), std::string::npos);
}

}  // namespace
}  // namespace surge::testing
