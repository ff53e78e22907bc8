// Fault cases end to end through the real CLI, part one: endpoints that hang or answer with
// hostile bodies (those that never accept, trickle or reset are the HTTP client's own tests,
// tests/engine/net/http_peer_faults_test.cpp). SSRF forms and TLS
// failures are drain_faults_targets_test.cpp; the queue file and the processes around it,
// drain_faults_queue_test.cpp.
// Deadlines are a second or two so that each case stays fast, and all traffic stays on loopback.
// docs/reliability.md maps each case to what Surge guarantees.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <optional>
#include <thread>

#include <boost/json/parse.hpp>

#include "tests/engine/drain/drain_faults_support.hpp"
#include "tests/support/e2e.hpp"
#include "tests/support/http_get.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
constexpr auto npos = std::string::npos;

// --- helpers --------------------------------------------------------------------------------

void set_max_in_flight(test_queue& queue, std::int64_t subscriber, int cap) {
  queue.db().exec("UPDATE webhook_subscriber SET max_in_flight = " + std::to_string(cap) +
                  " WHERE id = " + std::to_string(subscriber));
}

// VmHWM (peak resident set) of a live process in bytes; 0 once it has exited.
std::uint64_t peak_rss_bytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

// --- 1. hanging endpoint --------------------------------------------------------------------

TEST(DrainFaults, HangingEndpointIsAbortedAtTheDeadlineWhileAnotherSubscriberIsServed) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path(), {.behaviours_json = R"({"1": {"hang": true}})"});
  const auto hanging = subscriber_at(queue, sink);
  ASSERT_EQ(hanging, 1);
  const auto healthy = subscriber_at(queue, sink);
  const auto hung_rows = queue.add_rows(hanging, 2);
  const auto healthy_rows = queue.add_rows(healthy, 50);

  // One shard: both subscribers share one reactor thread and one HTTP client.
  const auto result = run_surge(dir, fast_drain(queue, {"--threads", "1", "--max-attempts", "2"}));
  ASSERT_EQ(result.exit_code, 0) << result.err;

  const auto requests = sink.stop_and_read();
  for (auto row : hung_rows) {
    const auto state = queue.row(row);
    EXPECT_EQ(state.status, "dead");
    EXPECT_EQ(state.attempts, 2) << "a timed-out attempt is retried";
    EXPECT_NE(state.last_error.find("attempt deadline"), npos) << state.last_error;
    const auto tries = attempts_of(queue, row);
    ASSERT_EQ(tries.size(), 2u);
    for (const auto& attempt : tries) {
      EXPECT_EQ(attempt.error_class, "timeout");
    }
  }
  double first_hang = std::numeric_limits<double>::max();
  double first_healthy = std::numeric_limits<double>::max();
  for (const auto& request : requests) {
    if (request.subscriber_id == hanging) first_hang = std::min(first_hang, request.arrival);
    if (request.subscriber_id == healthy) first_healthy = std::min(first_healthy, request.arrival);
  }
  for (auto row : healthy_rows) EXPECT_EQ(queue.row(row).status, "done");
  std::size_t healthy_delivered = 0;
  for (const auto& [id, count] : deliveries(requests)) {
    if (std::find(healthy_rows.begin(), healthy_rows.end(), id) != healthy_rows.end()) {
      ++healthy_delivered;
      EXPECT_EQ(count, 1);
    }
  }
  EXPECT_EQ(healthy_delivered, healthy_rows.size());
  // The hanging attempt did not hold the healthy subscriber up: it was served before that
  // attempt reached its 1 s deadline. An order, not a speed; that the origin's other
  // subscribers are served long before hanging requests time out is proved on a simulated clock
  // (ShardCorePartner.RequestsHangingAtOneSubscriberDoNotHoldTheOriginFromTheOthers).
  EXPECT_LT(first_healthy, first_hang + 1.0);
}

// --- 2-4. a listener that never accepts, a trickled response, resets: the HTTP client's own
// tests against such peers on loopback (tests/engine/net/http_peer_faults_test.cpp), and the
// retries that follow by ShardCore.AFailedAttemptIsRetriedAfterItsBackoffAndEndsDone.

// --- 5. hostile responses -------------------------------------------------------------------

struct watched_drain {
  int exit_code = -1;
  std::uint64_t peak_rss = 0;  // bytes
  std::uint64_t streamed = 0;  // body bytes the sink managed to write
  std::vector<sink_request> requests;
};

// Two rows, sent one at a time (so a reused connection shows in the record), to a sink answering
// with `behaviour`; the drain's peak RSS is sampled from /proc while it runs.
watched_drain drain_watching_memory(const std::string& behaviour) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path(), {.behaviours_json = R"({"*": )" + behaviour + "}"});
  const auto id = subscriber_at(queue, sink);
  set_max_in_flight(queue, id, 1);
  const auto rows = queue.add_rows(id, 2);

  tools::child_process drain(
      surge_binary(),
      fast_drain(queue, {"--max-attempts", "1"}, {.connect = "1", .attempt = "2", .lease = "5"}),
      dir.file("drain.out"), dir.file("drain.err"));
  // VmHWM only grows, and the drain idles for two drained checks (0.5 s) after the last
  // response before it exits, so polling sees the peak.
  watched_drain out;
  std::optional<int> status;
  const auto give_up = steady::now() + 60s;
  while (!(status = drain.wait(20ms)) && steady::now() < give_up) {
    out.peak_rss = std::max(out.peak_rss, peak_rss_bytes(drain.pid()));
  }
  if (!status) status = drain.stop(5s);
  out.exit_code = *status;
  const auto stats = http_get(sink.port(), "/_sink/stats");
  if (stats.status == 200) {
    out.streamed =
        boost::json::parse(stats.body).at("streamed_body_bytes").to_number<std::uint64_t>();
  }
  out.requests = sink.stop_and_read();
  for (auto row : rows) {
    const auto state = queue.row(row);
    EXPECT_EQ(state.status, "done") << "the status (200) decides, whatever the body does: row "
                                    << row << ": " << state.last_error;
    EXPECT_EQ(state.attempts, 1);
    EXPECT_EQ(state.last_status.value_or(0), 200);
  }
  return out;
}

// The drain must read at most its 4 KiB cap of a hostile body, close the connection, go by the
// status, and keep its memory where a drain of plain answers has it.
void expect_hostile_body_is_cut(const std::string& behaviour) {
  constexpr std::uint64_t hundred_mb = 100ull * 1024 * 1024;
  // The same drain against plain answers: the memory yardstick, whatever the build (a
  // sanitizer build starts far higher than a plain one).
  const auto plain = drain_watching_memory(R"({"status": 200})");
  ASSERT_EQ(plain.exit_code, 0);
  const auto hostile = drain_watching_memory(behaviour);
  ASSERT_EQ(hostile.exit_code, 0);
  ASSERT_GT(plain.peak_rss, 0u) << "could not read the drain's VmHWM";
  ASSERT_GT(hostile.peak_rss, 0u) << "could not read the drain's VmHWM";

  ASSERT_EQ(hostile.requests.size(), 2u);
  EXPECT_NE(hostile.requests[0].connection_id, hostile.requests[1].connection_id)
      << "a connection with an unread body on it was reused";
  // The sink offered 100 MB or more per row; a drain that stops at its cap lets it write no more
  // than the loopback socket buffers hold before the connection closes.
  EXPECT_LT(hostile.streamed, hundred_mb) << "the drain read a hostile body to the end";
  EXPECT_LT(hostile.peak_rss, plain.peak_rss + 32ull * 1024 * 1024)
      << "peak RSS " << hostile.peak_rss / (1024 * 1024) << " MiB against "
      << plain.peak_rss / (1024 * 1024) << " MiB for plain answers";
  std::cerr << behaviour << ": drain peak RSS " << hostile.peak_rss / 1024 << " KiB (plain "
            << plain.peak_rss / 1024 << " KiB), sink streamed " << hostile.streamed << " bytes\n";
}

TEST(DrainFaults, HundredMegabyteBodyIsCutAtTheCapWithFlatMemory) {
  expect_hostile_body_is_cut(R"({"body_bytes": 104857600})");
}

}  // namespace
}  // namespace surge::testing
