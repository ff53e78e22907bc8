// Batches through the real binary against peers Surge did not write: a receiver built from the
// docs' Python examples, and nginx refusing bodies over its limit. The batching rules (size, byte
// cap, linger, retries as a unit, one token per POST, settings reloaded while draining) are proved
// on the shard core's simulated clock (tests/engine/shard/core_test.cpp, core_partner_test.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <boost/json/parse.hpp>

#include "tests/support/e2e.hpp"
#include "tests/support/nginx.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;

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
