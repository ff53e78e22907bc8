// Batches end to end: the real `surge drain` and `surge sink` on loopback, settings
// made with the real `surge subscriber` command, on a real queue file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <tuple>
#include <thread>

#include <SQLiteCpp/Statement.h>
#include <boost/json/parse.hpp>
#include <openssl/evp.h>

#include "proto/clock.hpp"
#include "storage/sqlite/database.hpp"
#include "tests/support/e2e.hpp"
#include "tests/support/nginx.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;

struct batch_env {
  temp_dir dir;
  test_queue queue{dir};
  std::optional<sink_process> sink;
  std::map<std::int64_t, std::string> payloads;  // every row's payload, by id

  explicit batch_env(const std::string& behaviours = {}) {
    sink.emplace(dir, queue.path(), sink_process::options{.behaviours_json = behaviours});
  }

  // A subscriber at the sink, then `surge subscriber set` with `settings`.
  std::int64_t subscriber(double rate, int burst, const std::vector<std::string>& settings,
                          const std::string& signing = "vvv",
                          const std::string& secret = "batch-secret") {
    const auto id = queue.add_subscriber_at(*sink, rate, burst, signing, secret);
    std::vector<std::string> args{"subscriber", "set", "--db", queue.path(), std::to_string(id)};
    args.insert(args.end(), settings.begin(), settings.end());
    const auto set = run_surge(dir, args);
    EXPECT_EQ(set.exit_code, 0) << set.err;
    return id;
  }

  // Rows with distinct payloads of about `size` bytes, so bodies can be checked byte for byte.
  std::vector<std::int64_t> rows(std::int64_t subscriber_id, int count, std::size_t size = 40) {
    std::vector<std::int64_t> ids;
    for (int i = 0; i < count; ++i) {
      std::string payload = R"({"n":)" + std::to_string(i) + R"(,"pad":")";
      payload += std::string(size > payload.size() + 2 ? size - payload.size() - 2 : 0, 'x');
      payload += R"("})";
      const auto id = queue.add_rows(subscriber_id, 1, payload).front();
      payloads[id] = payload;
      ids.push_back(id);
    }
    return ids;
  }

  run_result drain(std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"drain",
                                  "--db",
                                  queue.path(),
                                  "--until-drained",
                                  "--until-drained-wait",
                                  "10",
                                  "--allow-private-targets",
                                  "--progress-interval",
                                  "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_surge(dir, args);
  }

  // The body a batch of these ids must have had.
  std::string body_of(const std::vector<std::int64_t>& ids) const {
    std::string body = "[";
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) body += ",";
      body += payloads.at(ids[i]);
    }
    return body + "]";
  }
};

TEST(DrainBatch, EveryRowArrivesOnceInSignedBatchesInBothSchemes) {
  batch_env env;
  const auto vvv = env.subscriber(200, 5, {"--batch", "25"});
  const auto standard = env.subscriber(200, 5, {"--batch", "25"}, "standard",
                                       "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
  std::set<std::int64_t> expected;
  for (const auto id : env.rows(vvv, 120)) expected.insert(id);
  for (const auto id : env.rows(standard, 120)) expected.insert(id);

  const auto result = env.drain();
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto requests = env.sink->stop_and_read();
  int batches = 0;
  for (const auto& request : requests) {
    // The sink verified each signature over the whole body, in the subscriber's scheme.
    EXPECT_EQ(request.verdict, "ok") << "batch from " << request.delivery_id;
    ASSERT_GT(request.batch_size, 0) << "a JSON row of a batch subscriber went alone";
    EXPECT_EQ(request.batch_size, static_cast<int>(request.batch_ids.size()));
    EXPECT_LE(request.batch_size, 25);
    // The payloads' bytes unchanged, in queue order, as one JSON array.
    EXPECT_EQ(request.body_sha256, sha256_hex(env.body_of(request.batch_ids)));
    EXPECT_TRUE(std::is_sorted(request.batch_ids.begin(), request.batch_ids.end()));
    ++batches;
  }
  const auto per_row = deliveries(requests);
  EXPECT_EQ(per_row.size(), expected.size());
  for (const auto id : expected) EXPECT_EQ(per_row.count(id) ? per_row.at(id) : 0, 1) << id;
  EXPECT_LE(batches, 2 * (120 / 25 + 1) + 4);  // far fewer requests than rows
  EXPECT_EQ(env.queue.count_by_status()["done"], 240);

  // surge_attempt keeps one record per row; the audit counts requests apart from rows.
  const auto audit = run_surge(env.dir, {"audit", "--db", env.queue.path(), "--json"});
  ASSERT_EQ(audit.exit_code, 0) << audit.err;
  const auto report = boost::json::parse(audit.out);
  std::int64_t posts = 0, rows = 0;
  for (const auto& entry : report.as_array()) {
    posts += entry.at("attempts").as_int64();
    rows += entry.at("rows").as_int64();
  }
  EXPECT_EQ(posts, batches);
  EXPECT_EQ(rows, 240);
}

TEST(DrainBatch, AFailingBatchIsRetriedAsAUnitAndDoneOnlyAfterA2xx) {
  // The sink judges a batch by its first row: each batch's first request gets a 500.
  batch_env env(R"({"*": {"fail_first": 1, "status": 500}})");
  const auto id = env.subscriber(100, 3, {"--batch", "10"});
  const auto rows = env.rows(id, 40);
  const auto result = env.drain({"--retry-base", "0.3"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto requests = env.sink->stop_and_read();

  std::map<std::vector<std::int64_t>, std::vector<sink_request>> by_batch;
  for (const auto& request : requests) by_batch[request.batch_ids].push_back(request);
  int failed_batches = 0;
  for (auto& [ids, tries] : by_batch) {
    ASSERT_FALSE(ids.empty());
    std::sort(tries.begin(), tries.end(), [](auto& a, auto& b) { return a.arrival < b.arrival; });
    // The same rows went again together, after the backoff, and then got their 2xx.
    ASSERT_EQ(tries.size(), 2u) << "batch starting " << ids.front();
    EXPECT_EQ(tries[0].status, 500);
    EXPECT_EQ(tries[0].attempt, 1);
    EXPECT_EQ(tries[1].status, 200);
    EXPECT_EQ(tries[1].attempt, 2);
    EXPECT_GE(tries[1].arrival - tries[0].arrival, 0.3 * 0.5);
    ++failed_batches;
  }
  EXPECT_GE(failed_batches, 4);
  for (const auto row : rows) {
    const auto state = env.queue.row(row);
    EXPECT_EQ(state.status, "done") << row;
    EXPECT_EQ(state.attempts, 2) << row;
    EXPECT_EQ(state.last_status.value_or(0), 200) << row;
  }
}

TEST(DrainBatch, TheByteCapHoldsAndAPayloadThatIsNotJsonGoesAlone) {
  batch_env env;
  const auto id = env.subscriber(500, 20, {"--batch", "50", "--batch-bytes", "1000"});
  auto rows = env.rows(id, 60, 100);
  const auto odd = env.queue.add_rows(id, 1, "not json, sent as it is").front();
  env.payloads[odd] = "not json, sent as it is";
  const auto result = env.drain();
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto requests = env.sink->stop_and_read();
  int alone = 0;
  std::size_t largest = 0;
  for (const auto& request : requests) {
    EXPECT_EQ(request.verdict, "ok");
    if (request.batch_size == 0) {
      EXPECT_EQ(request.delivery_id, odd);
      EXPECT_EQ(request.body_sha256, sha256_hex(env.payloads[odd]));
      ++alone;
      continue;
    }
    const auto body = env.body_of(request.batch_ids);
    EXPECT_LE(body.size(), 1000u) << "batch starting " << request.delivery_id;
    EXPECT_EQ(request.body_sha256, sha256_hex(body));
    largest = std::max(largest, request.batch_ids.size());
  }
  EXPECT_EQ(alone, 1);
  EXPECT_GE(largest, 8u);  // ~100-byte payloads: 9 fit under 1000 bytes
  EXPECT_EQ(deliveries(requests).size(), rows.size() + 1);
}

TEST(DrainBatch, ThePartnersLimitCountsRequestsNotRows) {
  batch_env env;
  const auto id = env.subscriber(4, 2, {"--batch", "10", "--batch-linger", "0.2"});
  env.rows(id, 150);
  const auto result = env.drain();
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto requests = env.sink->stop_and_read();
  std::vector<double> arrivals;
  for (const auto& request : requests) arrivals.push_back(request.arrival);
  EXPECT_EQ(deliveries(requests).size(), 150u);
  // Within burst + rate * T + 1 in every window, counting requests.
  EXPECT_LE(max_in_window(arrivals, 1.0), 2 + 4 + 1);
  EXPECT_LE(max_in_window(arrivals, 2.0), 2 + 8 + 1);
  EXPECT_LE(arrivals.size(), 150u / 10 + 2);
  const auto audit = run_surge(env.dir, {"audit", "--db", env.queue.path(), "--json"});
  ASSERT_EQ(audit.exit_code, 0) << audit.err;
  const auto entry = boost::json::parse(audit.out).as_array().at(0);
  EXPECT_FALSE(entry.at("violation").as_bool()) << audit.out;
  EXPECT_EQ(entry.at("rows").as_int64(), 150);
  EXPECT_EQ(entry.at("attempts").as_int64(), static_cast<std::int64_t>(arrivals.size()));
}

TEST(DrainBatch, ASettingChangedWhileDrainingAppliesWithoutARestart) {
  batch_env env;
  const auto id = env.subscriber(8, 1, {});
  env.rows(id, 120);
  tools::child_process drain(surge_binary(),
                             {"drain", "--db", env.queue.path(), "--allow-private-targets",
                              "--until-drained", "--progress-interval", "0"},
                             env.dir.file("drain.out"), env.dir.file("drain.err"));
  // Some rows go out one by one first (waited for: the drain may start late).
  eventually([&] { return env.queue.count_by_status()["done"] >= 6; }, 60s);
  const double changed_at = proto::unix_now();
  const auto set = run_surge(env.dir, {"subscriber", "set", "--db", env.queue.path(),
                                       std::to_string(id), "--batch", "20"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  ASSERT_EQ(drain.wait(60s).value_or(-1), 0);
  const auto requests = env.sink->stop_and_read();
  int singles_before = 0, batches_after = 0;
  for (const auto& request : requests) {
    if (request.arrival < changed_at) singles_before += request.batch_size == 0;
    if (request.arrival > changed_at) batches_after += request.batch_size > 0;
    // Nothing was a batch before the change.
    if (request.arrival < changed_at) {
      EXPECT_EQ(request.batch_size, 0);
    }
  }
  EXPECT_GE(singles_before, 5);
  EXPECT_GE(batches_after, 1);
  EXPECT_EQ(deliveries(requests).size(), 120u);
  EXPECT_EQ(env.queue.count_by_status()["done"], 120);
}

TEST(DrainBatch, RetryAfterPausesTheSubscriberAndTheSameBatchGoesAgain) {
  batch_env env(R"({"*": {"fail_first": 1, "status": 429, "retry_after": "1"}})");
  const auto id = env.subscriber(50, 1, {"--batch", "30"});
  env.rows(id, 60);
  const auto result = env.drain();
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto requests = env.sink->stop_and_read();
  // Nothing starts during the second the partner asked for, counted from the 429's arrival
  // (a request already in flight then may still land inside it).
  SQLite::Statement posts(env.queue.db(),
                          "SELECT started_at, finished_at, COALESCE(status_code, 0) FROM "
                          "surge_attempt WHERE batch_lead IS NULL OR batch_lead = delivery_id");
  std::vector<std::tuple<double, double, int>> attempts;
  while (posts.executeStep()) {
    attempts.emplace_back(posts.getColumn(0).getDouble(), posts.getColumn(1).getDouble(),
                          posts.getColumn(2).getInt());
  }
  ASSERT_FALSE(attempts.empty());
  for (const auto& [started, finished, status] : attempts) {
    if (status != 429) continue;
    for (const auto& [later, ignored, also_ignored] : attempts) {
      if (later > finished) {
        EXPECT_GE(later - finished, 0.9) << "a request started in the pause";
      }
    }
  }
  std::map<std::vector<std::int64_t>, int> answers;
  for (const auto& request : requests) ++answers[request.batch_ids];
  for (const auto& [ids, count] : answers) EXPECT_EQ(count, 2) << "batch starting " << ids.front();
  EXPECT_EQ(deliveries(requests).size(), 60u);
  EXPECT_EQ(env.queue.count_by_status()["done"], 60);
}

TEST(DrainBatch, ACircuitOpenedByFailingBatchesRecoversAndLosesNothing) {
  // The partner is down (nothing listens on its port) until its URL is fixed mid-drain: the
  // failing batches open the circuit, a probe after the fix closes it, and batches resume.
  batch_env env;
  const auto id = env.subscriber(200, 10, {"--batch", "5"});
  env.rows(id, 60);
  env.queue.set_url(
      id, "http://127.0.0.1:" + std::to_string(unused_port()) + "/hook/" + std::to_string(id));
  tools::child_process drain(surge_binary(),
                             {"drain", "--db", env.queue.path(), "--allow-private-targets",
                              "--until-drained", "--progress-interval", "0", "--circuit-failures",
                              "3", "--circuit-max-cooldown", "1", "--retry-base", "0.2"},
                             env.dir.file("drain.out"), env.dir.file("drain.err"));
  std::this_thread::sleep_for(1500ms);
  const auto set = run_surge(env.dir, {"subscriber", "set", "--db", env.queue.path(),
                                       std::to_string(id), "--url", env.sink->url_for(id)});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  ASSERT_EQ(drain.wait(60s).value_or(-1), 0);
  std::ifstream err_file(env.dir.file("drain.err"));
  const std::string log((std::istreambuf_iterator<char>(err_file)), {});
  EXPECT_NE(log.find("circuit open"), std::string::npos) << log;
  const auto requests = env.sink->stop_and_read();
  EXPECT_EQ(deliveries(requests).size(), 60u);
  for (const auto& [row, count] : deliveries(requests)) EXPECT_EQ(count, 1) << row;
  EXPECT_EQ(env.queue.count_by_status()["done"], 60);
  for (const auto& request : requests) EXPECT_LE(request.batch_size, 5);
}

TEST(DrainBatch, AdaptivePaceSlowsBatchesForAPartnerThatPushesBack) {
  // The partner accepts 5 requests/s although the subscriber allows 40; the rest get 429.
  batch_env env(R"({"*": {"accept_rate": 5}})");
  const auto id = env.subscriber(40, 2, {"--batch", "4"});
  env.rows(id, 160);
  const auto result = env.drain();
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto requests = env.sink->stop_and_read();
  int refused = 0;
  for (const auto& request : requests) refused += request.status == 429;
  EXPECT_EQ(env.queue.count_by_status()["done"], 160);
  // Pushback lowered the pace: most requests were accepted, not one 429 per accepted one.
  EXPECT_LT(refused, static_cast<int>(requests.size()) / 2) << refused << " of " << requests.size();
}

TEST(DrainBatch, APythonReceiverBuiltFromTheDocsVerifiesAndDedupesEveryEvent) {
  // docs/subscribers.md's Python examples, run by Python's http.server: batches and single
  // requests in both schemes, checked by code Surge did not write.
  temp_dir dir;
  test_queue queue(dir);
  const std::string standard_secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  const auto vvv = queue.add_subscriber("http://placeholder/", 500, 20);
  const auto standard =
      queue.add_subscriber("http://placeholder/", 500, 20, "standard", standard_secret);
  std::ofstream(dir.file("secrets.json"))
      << R"({")" << vvv << R"(": ["vvv", "test-secret"], ")" << standard << R"(": ["standard", ")"
      << standard_secret << R"("]})";
  const std::string port_file = dir.file("receiver.port");
  tools::child_process receiver(
      "/usr/bin/python3",
      {SURGE_SOURCE_DIR "/tests/support/doc_receiver.py", SURGE_SOURCE_DIR "/docs/subscribers.md",
       dir.file("secrets.json"), port_file, dir.file("result.json")},
      dir.file("receiver.out"), dir.file("receiver.err"));
  const auto port = tools::wait_for_file(port_file, 10s);
  ASSERT_TRUE(port) << "the receiver did not start";
  for (const auto id : {vvv, standard}) {
    queue.set_url(id, "http://127.0.0.1:" + *port + "/hook/" + std::to_string(id));
    const auto set = run_surge(dir, {"subscriber", "set", "--db", queue.path(), std::to_string(id),
                                     "--batch", "20", "--batch-bytes", "500"});
    ASSERT_EQ(set.exit_code, 0) << set.err;
    // 50-byte events: 9 fit in 500 bytes.
    queue.add_rows(id, 70, R"({"type":"video.trending","data":{"video_id":"v1"}})");
    // Over the byte cap on its own: sent alone, in the single-request form.
    queue.add_rows(id, 1, R"({"type":"video.trending","pad":")" + std::string(600, 'x') + "\"}");
  }
  const auto result = run_surge(dir, {"drain", "--db", queue.path(), "--until-drained",
                                      "--allow-private-targets", "--progress-interval", "0"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  receiver.stop();
  std::ifstream in(dir.file("result.json"));
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  const auto report = boost::json::parse(text).as_object();
  EXPECT_EQ(report.at("rejected").as_int64(), 0) << text;
  EXPECT_EQ(report.at("duplicates").as_int64(), 0) << text;
  EXPECT_EQ(report.at("events").as_object().size(), 142u) << text;
  EXPECT_GE(report.at("batches").as_int64(), 8) << text;
  EXPECT_LE(report.at("requests").as_int64(), 2 * (70 / 9 + 1) + 2 + 4) << text;
  EXPECT_EQ(queue.count_by_status()["done"], 142);
}

// A partner whose gateway refuses bodies over 1 KiB with 413: nginx's client_max_body_size, a
// peer Surge did not write. Before, the identical 50-row batch went again until its attempts ran
// out and all 200 rows died. Now a 413 to a batch halves it at once, without using an attempt,
// and later batches stay at the size that worked.
TEST(DrainBatch, ABatchRefusedAsTooLargeIsSplitUntilThePartnerTakesIt) {
  const auto nginx = nginx_binary();
  if (!nginx) GTEST_SKIP() << "nginx is not installed (Debian package nginx-light)";
  temp_dir dir;
  test_queue queue(dir);
  const auto port = unused_port();
  const auto root = dir.file("nginx");
  std::filesystem::create_directories(root + "/www");
  {
    std::ofstream conf(root + "/nginx.conf");
    conf << nginx_conf_prelude(root) << "  log_format posts '$uri $status $request_length';\n"
         << "  access_log " << root << "/access.log posts;\n"
         << "  client_max_body_size 1k;\n"
         << "  server {\n    listen 127.0.0.1:" << port << ";\n"
         << "    location = /ready { return 204; }\n"
         << "    location /hook/ { return 204; }\n  }\n}\n";
  }
  auto server = start_nginx(*nginx, root, port);
  const auto id =
      queue.add_subscriber("http://127.0.0.1:" + std::to_string(port) + "/hook/1", 1000, 100);
  const auto set = run_surge(dir, {"subscriber", "set", "--db", queue.path(), std::to_string(id),
                                   "--batch", "50", "--batch-linger", "0.5"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  // About 60 bytes each: a batch of more than about 14 is over 1 KiB.
  queue.add_rows(id, 200, R"({"video":"v1","pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"})");
  // One request at a time, so the access log is in the order the batches were decided.
  const auto result =
      run_surge(dir, {"drain", "--db", queue.path(), "--until-drained", "--allow-private-targets",
                      "--progress-interval", "0", "--per-subscriber-in-flight", "1"});
  server.stop();
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(queue.count_by_status()["done"], 200) << result.err;
  EXPECT_EQ(queue.count_by_status()["dead"], 0);
  // No attempt was used up by a 413: each row ends with the one attempt that got 204.
  EXPECT_EQ(queue.sql().number("SELECT MAX(attempts) FROM webhook_delivery"), 1);
  int refused = 0;
  int accepted = 0;
  std::ifstream log(root + "/access.log");
  std::string uri;
  int status = 0;
  long length = 0;
  while (log >> uri >> status >> length) {
    if (uri.rfind("/hook/", 0) != 0) continue;
    if (status == 413) {
      ++refused;
      EXPECT_EQ(accepted, 0) << "once a size worked, no batch was refused again";
    } else {
      ++accepted;
    }
  }
  // 50 refused, 25 refused, 12 taken.
  EXPECT_EQ(refused, 2) << "halving finds the size that works, and it is remembered";
  EXPECT_GE(accepted, 200 / 14);
  EXPECT_NE(result.err.find("its batches are now at most"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace surge::testing
