// Fault cases end to end through the real CLI: targets that are not
// public (SSRF forms), redirects, and TLS failures. The endpoints' other faults are
// drain_faults_test.cpp; the queue file and the processes around it, drain_faults_queue_test.cpp.
// Deadlines are a second or two so that each case stays fast, and all traffic stays on loopback.
// docs/reliability.md maps each case to what Surge guarantees.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "tests/engine/drain/drain_faults_support.hpp"
#include "tests/support/e2e.hpp"
#include "tests/support/test_pki.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;
constexpr auto npos = std::string::npos;

// --- 6. SSRF --------------------------------------------------------------------------------

TEST(DrainFaults, EveryFormOfANonPublicTargetIsRefusedWithoutTheFlag) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path());
  const std::string port = std::to_string(sink.port());
  // The same port on ::1, so that the IPv6 forms have a listener to (not) reach too.
  std::optional<sink_process> sink_v6;
  try {
    sink_v6.emplace(dir, queue.path(), sink_process::options{.port = sink.port(), .host = "::1"});
  } catch (const std::exception& error) {
    std::cerr << "no listener on [::1]:" << port << " (" << error.what() << ")\n";
  }

  struct target_case {
    std::string host_port;    // authority of the URL
    std::string reason;       // expected in last_error
    bool loopback_reachable;  // reaches a listener here when private targets are allowed
    bool malformed = false;   // a URL no resolver is asked about: its rows die
  };
  const std::vector<target_case> cases = {
      {"127.0.0.1:" + port, "refused non-public address 127.0.0.1 (loopback)", true},
      {"2130706433:" + port, "malformed URL: has a numeric host", false, true},
      {"0x7f.1:" + port, "malformed URL: has a numeric host", false, true},
      {"0177.0.0.1:" + port, "malformed URL: has a numeric host", false, true},
      {"127.1:" + port, "malformed URL: has a numeric host", false, true},
      {"[::1]:" + port, "refused non-public address ::1 (loopback)", sink_v6.has_value()},
      {"[::ffff:127.0.0.1]:" + port, "(loopback)", sink_v6.has_value()},  // needs IPv6
      // NAT64 of 127.0.0.1: classified by the embedded address; nothing routes it here.
      {"[64:ff9b::7f00:1]:" + port, "(loopback)", false},
      // Cloud metadata: never contacted, not even in the control run below.
      {"169.254.169.254", "(metadata)", false},
      {"0.0.0.0:" + port, "(unspecified)", true},
      {"localhost:" + port, "(loopback)", true},
  };
  std::map<std::int64_t, const target_case*> by_row;
  std::map<std::int64_t, std::int64_t> subscriber_of;
  std::set<std::int64_t> reachable_subscribers;
  for (const auto& target : cases) {
    const auto id = queue.add_subscriber("http://placeholder/", 100, 10);
    queue.set_url(id, "http://" + target.host_port + "/hook/" + std::to_string(id));
    const auto row = queue.add_rows(id, 1).front();
    by_row[row] = &target;
    subscriber_of[row] = id;
    if (target.loopback_reachable) reachable_subscribers.insert(id);
  }

  auto args = fast_drain(queue, {"--max-attempts", "3"});
  args.erase(std::find(args.begin(), args.end(), "--allow-private-targets"));  // a flag alone
  const auto result = run_surge(dir, args);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (const auto& [row, target] : by_row) {
    const auto state = queue.row(row);
    EXPECT_NE(state.last_error.find(target->reason), npos)
        << target->host_port << ": " << state.last_error;
    if (target->malformed) {
      EXPECT_EQ(state.status, "dead") << target->host_port << " was not refused outright";
      continue;
    }
    // A refused address is the subscriber's state, not its rows' fate: the row waits, with
    // no attempt spent, and the subscriber is named once in a warning.
    EXPECT_NE(state.status, "dead") << target->host_port;
    EXPECT_EQ(state.attempts, 0) << target->host_port;
    EXPECT_NE(state.last_error.find("subscriber held: refused target"), npos) << state.last_error;
    const auto subscriber = std::to_string(subscriber_of.at(row));
    const auto warning = "subscriber " + subscriber + " held: its URL's host gives";
    const auto first = result.err.find(warning);
    EXPECT_NE(first, npos) << result.err;
    EXPECT_EQ(result.err.find(warning, first + 1), npos) << "one warning per subscriber";
  }
  EXPECT_TRUE(record_so_far(sink).empty()) << "a refused target reached the IPv4 listener";
  if (sink_v6) {
    EXPECT_TRUE(record_so_far(*sink_v6).empty()) << "a refused target reached [::1]";
  }

  // Control: with the flag, the loopback forms do reach the listeners, so the refusal above is
  // the policy at work and not an unreachable address.
  std::string reachable_ids;
  for (auto id : reachable_subscribers) {
    reachable_ids += (reachable_ids.empty() ? "" : ",") + std::to_string(id);
  }
  queue.db().exec(
      "UPDATE webhook_delivery SET status = 'pending', attempts = 0, next_attempt_at = 0 "
      "WHERE subscriber_id IN (" +
      reachable_ids + ")");
  const auto allowed = run_surge(dir, fast_drain(queue, {"--subscribers", reachable_ids}));
  ASSERT_EQ(allowed.exit_code, 0) << allowed.err;
  std::set<std::int64_t> reached;
  for (const auto& request : sink.stop_and_read()) reached.insert(request.subscriber_id);
  if (sink_v6) {
    for (const auto& request : sink_v6->stop_and_read()) reached.insert(request.subscriber_id);
  }
  EXPECT_EQ(reached, reachable_subscribers);
}

// A partner on a private range the operator names goes out; every other non-public address
// stays refused, as without the flag.
TEST(DrainFaults, AnAllowedRangeLetsItsPartnerGoAndNoOtherPrivateAddress) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path());
  const auto inside = queue.add_subscriber_at(sink, 100, 10);
  const auto outside = queue.add_subscriber("http://placeholder/", 100, 10);
  queue.set_url(outside,
                "http://[::1]:" + std::to_string(sink.port()) + "/hook/" + std::to_string(outside));
  queue.add_rows(inside, 5);
  const auto waiting = queue.add_rows(outside, 1).front();
  auto args = fast_drain(queue, {"--allow-targets", "127.0.0.0/8"});
  args.erase(std::find(args.begin(), args.end(), "--allow-private-targets"));
  const auto result = run_surge(dir, args);
  // The other partner's row waits for its next try (a minute), and the summary names why.
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("held: subscriber " + std::to_string(outside)), npos) << result.out;
  EXPECT_NE(
      result.out.find("left: subscriber " + std::to_string(outside) + ": 1 rows (refused_target"),
      npos)
      << result.out;
  const auto requests = sink.stop_and_read();
  EXPECT_EQ(requests.size(), 5u);
  for (const auto& request : requests) EXPECT_EQ(request.subscriber_id, inside);
  const auto row = queue.row(waiting);
  EXPECT_EQ(row.attempts, 0);
  EXPECT_NE(row.last_error.find("refused non-public address ::1 (loopback)"), npos)
      << row.last_error;
}

// --- 7. TLS failures ------------------------------------------------------------------------

TEST(DrainFaults, TlsFailuresSendNothingAndTheServerNameIsSent) {
  temp_dir dir;
  const auto pki = make_test_pki(dir.path());
  const auto self_signed = make_self_signed_cert(dir.path());
  const auto expired = make_expired_cert(dir.path(), pki);
  test_queue queue(dir);

  struct tls_case {
    std::string name;
    sink_process::options sink;
    std::string host;  // in the URL
  };
  std::vector<tls_case> failing = {
      {"self-signed", {.tls_cert = self_signed.cert, .tls_key = self_signed.key}, "localhost"},
      // The certificate names localhost and 127.0.0.1; the URL names 127.0.0.2.
      {"wrong host",
       {.tls_cert = pki.server_cert, .tls_key = pki.server_key, .host = "127.0.0.2"},
       "127.0.0.2"},
      {"expired", {.tls_cert = expired.cert, .tls_key = expired.key}, "localhost"},
      {"TLS 1.1 only",
       {.tls_cert = pki.server_cert, .tls_key = pki.server_key, .tls_max_version = "1.1"},
       "localhost"},
  };
  std::vector<std::unique_ptr<sink_process>> sinks;
  std::vector<std::int64_t> failing_rows;
  for (const auto& target : failing) {
    sinks.push_back(std::make_unique<sink_process>(dir, queue.path(), target.sink));
    const auto id = queue.add_subscriber("http://placeholder/", 100, 10);
    queue.set_url(id, sinks.back()->url_for(id, true, target.host));
    failing_rows.push_back(queue.add_rows(id, 1).front());
  }
  sink_process good(dir, queue.path(), {.tls_cert = pki.server_cert, .tls_key = pki.server_key});
  const auto good_id = queue.add_subscriber("http://placeholder/", 100, 10);
  queue.set_url(good_id, good.url_for(good_id, true, "localhost"));
  const auto good_rows = queue.add_rows(good_id, 3);

  const auto result =
      run_surge(dir, fast_drain(queue, {"--max-attempts", "1", "--ca-file", pki.ca_cert}));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (std::size_t i = 0; i < failing.size(); ++i) {
    const auto state = queue.row(failing_rows[i]);
    EXPECT_EQ(state.status, "dead") << failing[i].name;
    EXPECT_NE(state.last_error.find("TLS handshake with " + failing[i].host), npos)
        << failing[i].name << ": " << state.last_error;
    const auto tries = attempts_of(queue, failing_rows[i]);
    ASSERT_EQ(tries.size(), 1u) << failing[i].name;
    EXPECT_EQ(tries[0].error_class, "tls") << failing[i].name;
    EXPECT_TRUE(sinks[i]->stop_and_read().empty()) << failing[i].name << ": a request was sent";
  }
  const auto requests = good.stop_and_read();
  EXPECT_EQ(deliveries(requests).size(), good_rows.size());
  for (auto row : good_rows) EXPECT_EQ(queue.row(row).status, "done");
  for (const auto& request : requests) {
    EXPECT_EQ(request.verdict, "ok");
    EXPECT_EQ(request.sni, "localhost") << "SNI must carry the URL's host name";
  }
}

}  // namespace
}  // namespace surge::testing
