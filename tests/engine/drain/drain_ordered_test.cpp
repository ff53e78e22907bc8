// Ordered delivery per key through the real binary: the rule set with the real `surge subscriber`
// command, the real `surge drain` and `surge sink` on loopback, on a SQLite file and on
// PostgreSQL; dead keys replayed and resumed with the tools, and drains killed. That each key goes
// in enqueue order through retries while the others go on, and a row in flight or waiting for
// its retry holds back only its own key, is proved on the shard core's simulated clock with the
// storage's own walk (ShardCorePartner.*, tests/storage/ordered_keys_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <csignal>
#include <map>
#include <set>
#include <memory>

#include <boost/json/parse.hpp>

#include "proto/clock.hpp"
#include "tests/support/backends.hpp"
#include "tests/support/e2e.hpp"
#include "tests/support/http_get.hpp"
#include "tools/process.hpp"

namespace surge::testing {
namespace {

struct ordered_env {
  temp_dir dir;
  std::unique_ptr<test_queue> queue;
  std::optional<sink_process> sink;

  ordered_env(std::unique_ptr<test_queue> made, const std::string& behaviours)
      : queue(std::move(made)) {
    start_sink(behaviours);
  }
  void start_sink(const std::string& behaviours) {
    sink.reset();
    sink.emplace(dir, queue->path(), sink_process::options{.behaviours_json = behaviours});
  }
  // A subscriber at the sink, made ordered by `surge subscriber set`.
  std::int64_t subscriber(const std::vector<std::string>& order_flags, int max_in_flight = 32) {
    const auto id = queue->add_subscriber("http://placeholder/", 1000, 100);
    point_at_sink(id);
    queue->sql().exec("UPDATE webhook_subscriber SET max_in_flight = ? WHERE id = ?",
                      {std::to_string(max_in_flight), std::to_string(id)});
    std::vector<std::string> args{"subscriber", "set", "--db", queue->path(), std::to_string(id)};
    args.insert(args.end(), order_flags.begin(), order_flags.end());
    const auto set = run_surge(dir, args);
    EXPECT_EQ(set.exit_code, 0) << set.err;
    return id;
  }
  void point_at_sink(std::int64_t id) { queue->set_url(id, sink->url_for(id)); }
  std::int64_t row(std::int64_t subscriber_id, const std::string& key) {
    return queue->add_rows(subscriber_id, 1, R"({"video_id":")" + key + R"(","n":1})").at(0);
  }
  run_result drain(std::vector<std::string> extra) {
    std::vector<std::string> args{
        "drain", "--db", queue->path(), "--allow-private-targets", "--progress-interval", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_surge(dir, args);
  }
};

class DrainOrderedOn : public ::testing::TestWithParam<backend> {};

// A sample's value in a Prometheus exposition (-1 when absent).
double metric(const std::string& exposition, const std::string& name) {
  const auto at = exposition.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(exposition.substr(at + name.size() + 2));
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// On SQLite only: the PostgreSQL queue's stop, listing, resume and replay are proved against the
// server by OrderedKeysOn.ADeadRowStopsItsKeyUntilItIsReplayedOrTheKeyResumed/postgres and the
// CLI's by AdminCliOn.DeadReplayBySubscriberAndSince/PostgreSQL; the wiring here is the same.
TEST(DrainOrdered, ADeadRowStopsItsKeyUntilTheRowIsReplayedOrTheKeyResumed) {
  const temp_dir pg_dir;
  SURGE_QUEUE_FOR(backend::sqlite, pg_dir, made);
  // The partner refuses every row, and one attempt is all a row gets: each dies at once.
  ordered_env env(std::move(made), R"({"*": {"status": 422}})");
  const auto stops = env.subscriber({"--ordered", "/video_id", "--dead-key", "stop"});
  const auto moves_on = env.subscriber({"--ordered", "/video_id"});
  const auto g1 = env.row(stops, "g");
  const auto h1 = env.row(stops, "h");
  const auto g2 = env.row(stops, "g");
  const auto h2 = env.row(stops, "h");
  const auto k1 = env.row(moves_on, "k");
  const auto k2 = env.row(moves_on, "k");

  // While it runs, the stops are counted for the alert.
  tools::child_process first(
      surge_binary(),
      {"drain", "--db", env.queue->path(), "--allow-private-targets", "--duration", "3",
       "--max-attempts", "1", "--progress-interval", "0", "--metrics-listen", "127.0.0.1:0"},
      env.dir.file("first.out"), env.dir.file("first.err"));
  const auto port = metrics_port_from_log(env.dir.file("first.err"));
  ASSERT_NE(port, 0) << "no metrics address in the log";
  double stops_counted = 0;
  EXPECT_TRUE(eventually(
      [&] {
        stops_counted = metric(http_get(port, "/metrics").body, "surge_keys_stopped_total");
        return stops_counted >= 2;
      },
      std::chrono::seconds(10)));
  EXPECT_EQ(stops_counted, 2);
  ASSERT_EQ(first.wait(std::chrono::seconds(30)), 0);
  const auto first_log = read_file(env.dir.file("first.err"));
  auto requests = env.sink->stop_and_read();
  EXPECT_EQ(env.queue->row(g1).status, "dead");
  EXPECT_EQ(env.queue->row(h1).status, "dead");
  EXPECT_EQ(env.queue->row(g2).status, "pending");
  EXPECT_EQ(env.queue->row(h2).status, "pending");
  EXPECT_NE(first_log.find("key \"g\" stopped"), std::string::npos) << first_log;
  // By default the key moves on: k2 went, after k1 died.
  EXPECT_EQ(env.queue->row(k1).status, "dead");
  EXPECT_EQ(env.queue->row(k2).status, "dead");
  std::vector<std::int64_t> k_sent;
  for (const auto& request : requests) {
    if (request.subscriber_id == moves_on) k_sent.push_back(request.delivery_id);
  }
  EXPECT_EQ(k_sent, (std::vector<std::int64_t>{k1, k2}));

  const auto stats = run_surge(env.dir, {"stats", "--db", env.queue->path(), "--json"});
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  const auto stopped = boost::json::parse(stats.out).at("stopped_keys").as_array();
  ASSERT_EQ(stopped.size(), 2u) << stats.out;
  std::map<std::string, std::int64_t> stopped_by;  // key: the row that stopped it
  for (const auto& entry : stopped) {
    EXPECT_EQ(entry.at("subscriber_id").as_int64(), stops);
    stopped_by[std::string(entry.at("key").as_string())] = entry.at("delivery_id").as_int64();
  }
  EXPECT_EQ(stopped_by, (std::map<std::string, std::int64_t>{{"\"g\"", g1}, {"\"h\"", h1}}));
  const auto table = run_surge(env.dir, {"stats", "--db", env.queue->path()});
  EXPECT_NE(table.out.find("stopped key"), std::string::npos) << table.out;

  // h: its dead row is replayed (the newest dead row of the subscriber) and goes first; g: the
  // key is resumed past its dead row, which stays dead.
  env.start_sink("");
  env.point_at_sink(stops);
  const auto replay = run_surge(env.dir, {"dead", "replay", "--db", env.queue->path(),
                                          "--subscriber", std::to_string(stops), "--limit", "1"});
  ASSERT_EQ(replay.exit_code, 0) << replay.err;
  const auto resume = run_surge(env.dir, {"subscriber", "resume-key", "--db", env.queue->path(),
                                          std::to_string(stops), "--key", "\"g\""});
  ASSERT_EQ(resume.exit_code, 0) << resume.err;
  EXPECT_NE(resume.out.find("resumed 1 key"), std::string::npos) << resume.out;
  const auto unknown = run_surge(env.dir, {"subscriber", "resume-key", "--db", env.queue->path(),
                                           std::to_string(stops), "--key", "\"zz\""});
  EXPECT_NE(unknown.exit_code, 0);

  auto second = env.drain({"--duration", "2"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  requests = env.sink->stop_and_read();
  std::sort(requests.begin(), requests.end(),
            [](auto& a, auto& b) { return a.arrival < b.arrival; });
  std::vector<std::int64_t> h_sent;
  for (const auto& request : requests) {
    if (request.delivery_id == h1 || request.delivery_id == h2)
      h_sent.push_back(request.delivery_id);
  }
  EXPECT_EQ(h_sent, (std::vector<std::int64_t>{h1, h2}));
  EXPECT_EQ(env.queue->row(h1).status, "done");
  EXPECT_EQ(env.queue->row(h2).status, "done");
  EXPECT_EQ(env.queue->row(g1).status, "dead");
  EXPECT_EQ(env.queue->row(g2).status, "done");
  const auto after = run_surge(env.dir, {"stats", "--db", env.queue->path(), "--json"});
  EXPECT_TRUE(boost::json::parse(after.out).at("stopped_keys").as_array().empty()) << after.out;
}

// Rows as the sink received them, a batch's in its body order.
std::vector<std::int64_t> sent_in_order(std::vector<sink_request> requests,
                                        std::int64_t subscriber_id) {
  std::sort(requests.begin(), requests.end(),
            [](auto& a, auto& b) { return a.arrival < b.arrival; });
  std::vector<std::int64_t> sent;
  for (const auto& request : requests) {
    if (request.subscriber_id != subscriber_id) continue;
    if (request.batch_ids.empty()) {
      sent.push_back(request.delivery_id);
    } else {
      sent.insert(sent.end(), request.batch_ids.begin(), request.batch_ids.end());
    }
  }
  return sent;
}

// On SQLite, where the backlog's coalescing sweep merges the repeats: each key's order through
// batches alone is the shard core's
// (ShardCorePartner.BatchesOfSeveralKeysKeepEachKeysOrderThroughRetries), and the PostgreSQL
// queue's ordered claim and coalescing sweep are its storage tests' (OrderedKeysOn.*/postgres,
// CoalescingBacklogOn.*/PostgreSQL).
TEST(DrainOrdered, BatchesAndCoalescingKeepEachKeysOrder) {
  const temp_dir pg_dir;
  SURGE_QUEUE_FOR(backend::sqlite, pg_dir, made);
  ordered_env env(std::move(made), "");
  const auto batched =
      env.subscriber({"--ordered", "/video_id", "--batch", "8", "--batch-linger", "0.05"});
  // Ordered by channel, coalesced by video: a video's repeats merge into its newest row.
  const auto coalesced = env.subscriber(
      {"--ordered", "/channel", "--coalesce", "/video_id", "--coalesce-window", "60"});
  // Slow enough that the backlog's repeats are still queued when the coalescing sweep comes.
  env.queue->sql().exec("UPDATE webhook_subscriber SET rate_per_sec = 4, burst = 1 WHERE id = ?",
                        {std::to_string(coalesced)});
  std::map<std::int64_t, std::string> key_of;
  for (int event = 0; event < 6; ++event) {
    for (int key = 0; key < 10; ++key) {
      const auto name = "v" + std::to_string(key);
      key_of[env.row(batched, name)] = name;
    }
    for (int channel = 0; channel < 3; ++channel) {
      const auto name = "c" + std::to_string(channel);
      const auto payload = R"({"channel":")" + name + R"(","video_id":"v)" +
                           std::to_string(channel * 10 + event % 2) + R"(","n":)" +
                           std::to_string(event) + "}";
      key_of[env.queue->add_rows(coalesced, 1, payload).at(0)] = name;
    }
  }
  const auto result = env.drain({"--until-drained", "--until-drained-wait", "20"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto requests = env.sink->stop_and_read();
  int batches = 0;
  for (const auto& request : requests) batches += request.batch_size > 1 ? 1 : 0;
  EXPECT_GT(batches, 0) << "rows of different keys should have shared batches";
  for (const auto subscriber : {batched, coalesced}) {
    std::map<std::string, std::vector<std::int64_t>> per_key;
    for (const auto row : sent_in_order(requests, subscriber))
      per_key[key_of.at(row)].push_back(row);
    for (const auto& [key, rows] : per_key) {
      EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end())) << "key " << key;
      EXPECT_EQ(std::adjacent_find(rows.begin(), rows.end()), rows.end()) << "key " << key;
    }
  }
  const auto counts = env.queue->count_by_status();
  EXPECT_EQ(counts.count("pending") ? counts.at("pending") : 0, 0);
  // The backlog's coalescing sweep merged them; the shard's own merges only see rows it holds,
  // one per key here.
  EXPECT_GT(env.queue->sql().number(
                "SELECT count(*) FROM webhook_delivery WHERE coalesced_into IS NOT NULL"),
            0)
      << "the repeats of a video should have been coalesced";
}

// Whether each request came only after every earlier row of its key had been answered 2xx
// (at least once: a duplicate of an earlier row may follow); the first offence, or "".
std::string first_order_offence(std::vector<sink_request> requests,
                                const std::map<std::int64_t, std::string>& key_of,
                                const std::map<std::string, std::vector<std::int64_t>>& rows_of) {
  std::sort(requests.begin(), requests.end(),
            [](auto& a, auto& b) { return a.arrival < b.arrival; });
  std::set<std::int64_t> answered;
  for (const auto& request : requests) {
    const auto& key = key_of.at(request.delivery_id);
    for (const auto earlier : rows_of.at(key)) {
      if (earlier >= request.delivery_id) break;
      if (!answered.contains(earlier)) {
        return "key " + key + ": delivery " + std::to_string(request.delivery_id) +
               " went before " + std::to_string(earlier) + " was delivered";
      }
    }
    if (request.status == 200) answered.insert(request.delivery_id);
  }
  return {};
}

TEST_P(DrainOrderedOn, SeveralDrainsKeepEachKeysOrderWhileOneIsKilled) {
  const temp_dir pg_dir;
  SURGE_QUEUE_FOR(GetParam(), pg_dir, made);
  ordered_env env(std::move(made), R"({"*": {"mix": [[200, 0.8], [503, 0.2]], "delay_ms": 20}})");
  std::map<std::int64_t, std::string> key_of;
  std::map<std::string, std::vector<std::int64_t>> rows_of;
  std::vector<std::int64_t> subscribers;
  for (int i = 0; i < 3; ++i) subscribers.push_back(env.subscriber({"--ordered", "/video_id"}, 8));
  for (int event = 0; event < 6; ++event) {
    for (const auto subscriber : subscribers) {
      for (int key = 0; key < 5; ++key) {
        const auto name = std::to_string(subscriber) + "/v" + std::to_string(key);
        const auto row = env.row(subscriber, "v" + std::to_string(key));
        key_of[row] = name;
        rows_of[name].push_back(row);
      }
    }
  }
  const std::vector<std::string> args{"drain",
                                      "--db",
                                      env.queue->path(),
                                      "--allow-private-targets",
                                      "--until-drained",
                                      "--until-drained-wait",
                                      "10",
                                      "--lease",
                                      "5",
                                      "--attempt-timeout",
                                      "1",
                                      "--connect-timeout",
                                      "1",
                                      "--retry-base",
                                      "0.05",
                                      "--retry-cap",
                                      "0.2",
                                      "--max-attempts",
                                      "50",
                                      "--progress-interval",
                                      "0"};
  std::vector<std::unique_ptr<tools::child_process>> drains;
  for (const char* name : {"a", "b", "c"}) {
    drains.push_back(std::make_unique<tools::child_process>(
        surge_binary(), args, env.dir.file(std::string(name) + ".out"),
        env.dir.file(std::string(name) + ".err")));
  }
  // Killed mid-drain: its subscribers move to the others, with rows it held still leased.
  EXPECT_TRUE(eventually([&] { return env.queue->count_by_status()["done"] >= 20; },
                         std::chrono::seconds(20)));
  drains[1]->signal(SIGKILL);
  for (std::size_t i = 0; i < drains.size(); ++i) {
    if (i == 1) continue;
    EXPECT_EQ(drains[i]->wait(std::chrono::seconds(90)).value_or(-1), 0)
        << "see " << env.dir.path();
  }
  // A drain that saw nothing left may stop before the killed one's rows were taken over.
  const auto last = env.drain({"--until-drained", "--until-drained-wait", "10", "--retry-base",
                               "0.05", "--retry-cap", "0.2", "--max-attempts", "50"});
  ASSERT_EQ(last.exit_code, 0) << last.err;
  const auto requests = env.sink->stop_and_read();
  EXPECT_EQ(first_order_offence(requests, key_of, rows_of), "");
  for (const auto& [row, key] : key_of) EXPECT_EQ(env.queue->row(row).status, "done") << row;
}

INSTANTIATE_TEST_SUITE_P(Backends, DrainOrderedOn, all_backends(), backend_name);

}  // namespace
}  // namespace surge::testing
