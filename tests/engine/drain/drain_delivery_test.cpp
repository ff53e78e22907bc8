// End to end through the real CLI: `surge sink` and `surge drain` processes on loopback, a real
// queue file made by the shared DDL.
#include <gtest/gtest.h>

#include <set>

#include "tests/support/backends.hpp"
#include "tests/support/e2e.hpp"
#include "tests/support/test_pki.hpp"

namespace surge::testing {
namespace {

std::vector<std::string> drain_args(const test_queue& queue) {
  return {"drain",
          "--db",
          queue.path(),
          "--until-drained",
          "--allow-private-targets",
          "--progress-interval",
          "0",
          "--threads",
          "2"};
}

// On both kinds of queue: the sink reads the secrets from the same queue the drain claims from.
class DrainDeliveryOn : public ::testing::TestWithParam<backend> {};

TEST_P(DrainDeliveryOn, EveryRowOfEverySubscriberIsDeliveredOnceWithValidSignatures) {
  temp_dir dir;
  SURGE_QUEUE_FOR(GetParam(), dir, queue_held);
  test_queue& queue = *queue_held;
  sink_process sink(dir, queue.path());
  const std::vector<std::pair<std::string, std::string>> schemes = {
      {"vvv", "plain-secret-one"},
      {"standard", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
      // Key rotation: two secrets, the receiver knows both.
      {"standard", "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
      {"vvv", "another secret with spaces"},
  };
  std::set<std::int64_t> expected;
  for (const auto& [signing, secret] : schemes) {
    const auto id = queue.add_subscriber_at(sink, 5000, 500, signing, secret);
    for (auto row : queue.add_rows(id, 150)) expected.insert(row);
  }

  const auto result = run_surge(dir, drain_args(queue));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("(drained)"), std::string::npos) << result.out;

  const auto requests = sink.stop_and_read();
  for (const auto& request : requests) {
    EXPECT_EQ(request.verdict, "ok") << "delivery " << request.delivery_id;
    EXPECT_EQ(request.status, 200);
  }
  const auto per_delivery = deliveries(requests);
  EXPECT_EQ(per_delivery.size(), expected.size());
  for (auto id : expected) EXPECT_EQ(per_delivery.count(id), 1u) << "delivery " << id;
  EXPECT_EQ(queue.count_by_status()["done"], static_cast<std::int64_t>(expected.size()));
  // Keep-alive: far fewer connections than requests.
  std::set<std::uint64_t> connections;
  for (const auto& request : requests) connections.insert(request.connection_id);
  EXPECT_LT(connections.size(), requests.size() / 4);
}

INSTANTIATE_TEST_SUITE_P(Backends, DrainDeliveryOn, all_backends(), backend_name);

TEST(DrainDelivery, HttpsWithATestCaVerifiesTheServerByName) {
  temp_dir dir;
  const auto pki = make_test_pki(dir.path());
  test_queue queue(dir);
  sink_process sink(dir, queue.path(), {.tls_cert = pki.server_cert, .tls_key = pki.server_key});
  const auto trusted = queue.add_subscriber("http://placeholder/", 1000, 100);
  queue.db().exec("UPDATE webhook_subscriber SET url = '" +
                  sink.url_for(trusted, true, "localhost") +
                  "' WHERE id = " + std::to_string(trusted));
  const auto rows = queue.add_rows(trusted, 20);

  auto args = drain_args(queue);
  // Without the test CA the system store rejects the certificate: nothing is delivered.
  auto untrusted_args = args;
  untrusted_args.insert(untrusted_args.end(), {"--max-attempts", "1"});
  auto result = run_surge(dir, untrusted_args);
  // Rows left behind the circuit the failures opened: drained except held.
  ASSERT_TRUE(result.exit_code == 0 || result.exit_code == 5) << result.err;
  EXPECT_EQ(queue.row(rows.front()).status, "dead");
  EXPECT_NE(queue.row(rows.front()).last_error.find("TLS"), std::string::npos)
      << queue.row(rows.front()).last_error;

  queue.db().exec("UPDATE webhook_delivery SET status = 'pending', attempts = 0");
  args.insert(args.end(), {"--ca-file", pki.ca_cert});
  result = run_surge(dir, args);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto requests = sink.stop_and_read();
  EXPECT_EQ(deliveries(requests).size(), rows.size());
  for (const auto& request : requests) EXPECT_EQ(request.verdict, "ok");
  EXPECT_EQ(queue.count_by_status()["done"], static_cast<std::int64_t>(rows.size()));
}

TEST(DrainDelivery, BadRowsAreDeadLetteredWithAReasonWhileTheRestDrains) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path());
  const auto good = queue.add_subscriber_at(sink, 1000, 100);
  const auto malformed = queue.add_subscriber("http://placeholder/", 1000, 100);
  queue.db().exec("UPDATE webhook_subscriber SET url = 'ftp://example.com/x' WHERE id = " +
                  std::to_string(malformed));
  const auto inactive = queue.add_subscriber(sink.url_for(0), 1000, 100);
  queue.db().exec("UPDATE webhook_subscriber SET active = 0 WHERE id = " +
                  std::to_string(inactive));

  const auto good_rows = queue.add_rows(good, 30);
  const auto oversized = queue.add_rows(good, 1, "{\"blob\":\"" + std::string(4000, 'x') + "\"}");
  const auto malformed_rows = queue.add_rows(malformed, 3);
  const auto inactive_rows = queue.add_rows(inactive, 3);
  const auto orphan_rows = queue.add_rows(999, 3);  // no such subscriber

  auto args = drain_args(queue);
  args.insert(args.end(), {"--max-payload-bytes", "1024"});
  const auto result = run_surge(dir, args);
  ASSERT_EQ(result.exit_code, 5) << "drained except the inactive subscriber's rows: " << result.err;

  for (auto id : good_rows) EXPECT_EQ(queue.row(id).status, "done");
  auto expect_dead = [&](std::int64_t id, const std::string& reason) {
    const auto row = queue.row(id);
    EXPECT_EQ(row.status, "dead") << "row " << id;
    EXPECT_NE(row.last_error.find(reason), std::string::npos) << row.last_error;
  };
  expect_dead(oversized.front(), "payload too large");
  for (auto id : malformed_rows) expect_dead(id, "malformed URL");
  // Inactive means paused: its rows stay queued, untouched, for when it is enabled again.
  for (auto id : inactive_rows) {
    const auto row = queue.row(id);
    EXPECT_EQ(row.status, "pending") << "row " << id << ": " << row.last_error;
    EXPECT_EQ(row.attempts, 0);
    EXPECT_EQ(row.locked_until, 0);
  }
  for (auto id : orphan_rows) expect_dead(id, "unknown subscriber");
  EXPECT_EQ(deliveries(sink.stop_and_read()).size(), good_rows.size());
}

}  // namespace
}  // namespace surge::testing
