// Limits are live: changed in the table while a drain runs, and handed over to and from the
// steady-state drainer through the persisted bucket columns.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <set>
#include <string>
#include <thread>

#include <SQLiteCpp/Statement.h>

#include "proto/clock.hpp"
#include "storage/sqlite/database.hpp"
#include "tests/support/e2e.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;

std::vector<double> sorted_arrivals(const std::vector<sink_request>& requests) {
  std::vector<double> out;
  for (const auto& r : requests) out.push_back(r.arrival);
  std::sort(out.begin(), out.end());
  return out;
}

// Unthrottled subscribers of one sink: the first with `first_rows` rows due now, `others` more
// with `rows_each` rows due a second into the drain, when the first one holds the origin's slots.
struct first_and_others {
  std::int64_t first = 0;
  std::vector<std::int64_t> others;
};

first_and_others queue_first_then_others(test_queue& queue, const sink_process& sink,
                                         int first_rows, int others, int rows_each) {
  first_and_others out;
  out.first = queue.add_subscriber_at(sink, 1e6, 1'000'000);
  queue.add_rows(out.first, first_rows);
  for (int i = 0; i < others; ++i) {
    out.others.push_back(queue.add_subscriber_at(sink, 1e6, 1'000'000));
    queue.add_rows(out.others.back(), rows_each);
  }
  queue.db().exec(
      "UPDATE webhook_delivery SET next_attempt_at = next_attempt_at + 1 "
      "WHERE subscriber_id != " +
      std::to_string(out.first));
  return out;
}

TEST(DrainLimits, ARateChangedInTheTableAppliesWithoutARestart) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path());
  const auto id = queue.add_subscriber_at(sink, 4, 1);
  queue.add_rows(id, 300);

  tools::child_process drain(surge_binary(),
                             {"drain", "--db", queue.path(), "--allow-private-targets",
                              "--duration", "9", "--progress-interval", "0"},
                             dir.file("drain.out"), dir.file("drain.err"));
  std::this_thread::sleep_for(3s);
  const double changed_at = proto::unix_now();
  const auto set = run_surge(dir, {"subscriber", "set", "--db", queue.path(), std::to_string(id),
                                   "--rate", "40", "--burst", "1"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  ASSERT_EQ(drain.wait(30s).value_or(-1), 0);

  const auto arrivals = sorted_arrivals(sink.stop_and_read());
  const auto before =
      std::count_if(arrivals.begin(), arrivals.end(), [&](double t) { return t < changed_at; });
  // ~3 s at 4/s before the change; the re-read happens within 3 s of it, and then 40/s for
  // the rest: far more than the old rate could ever send in 9 s (36 + 1).
  EXPECT_LE(before, 4 * 3 + 2);
  EXPECT_GT(static_cast<double>(arrivals.size()), 4 * 9 + 1 + 40);
  // The new limit holds too: at most burst + 40 * T + 1 in any window after the change.
  std::vector<double> after;
  for (double t : arrivals) {
    if (t >= changed_at) after.push_back(t);
  }
  EXPECT_LE(max_in_window(after, 1.0), 1 + 40 + 1);
}

TEST(DrainLimits, BucketsAreSeededFromAndWrittenBackToThePersistedColumns) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path());
  const auto id = queue.add_subscriber("http://placeholder/", 2, 20);
  // The steady-state drainer just spent the whole burst: no second burst for Surge.
  queue.db().exec("UPDATE webhook_subscriber SET url = '" + sink.url_for(id) +
                  "', tokens = 0, tokens_updated_at = " + std::to_string(proto::unix_now()) +
                  " WHERE id = " + std::to_string(id));
  queue.add_rows(id, 100);

  const auto result = run_surge(dir, {"drain", "--db", queue.path(), "--allow-private-targets",
                                      "--duration", "3", "--progress-interval", "0"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto arrivals = sorted_arrivals(sink.stop_and_read());
  // An empty bucket at 2/s for ~3 s: about 6 requests, nowhere near a burst of 20.
  EXPECT_LE(arrivals.size(), 9u);
  EXPECT_GE(arrivals.size(), 3u);

  SQLite::Statement bucket(queue.db(),
                           "SELECT tokens, tokens_updated_at FROM webhook_subscriber WHERE id = ?");
  bucket.bind(1, id);
  ASSERT_TRUE(bucket.executeStep());
  // Written back at exit: a recent time and nearly nothing left (it was backlogged): at most the
  // last lease (about a second of refill, 2 tokens) given back unspent at the stop, far from
  // the burst of 20 a full bucket would hold.
  EXPECT_LT(bucket.getColumn(0).getDouble(), 2.5);
  EXPECT_GT(bucket.getColumn(1).getDouble(), proto::unix_now() - 10);
}

// Requests hanging at one subscriber's path do not hold its origin from the others (scenario
// e). With the origin limit on, as by default, the hanging subscriber's requests fill the
// origin's first slots and never answer; they stop counting against its limit once overdue
// (1 s before any answer, then 10 x the best latency, at least 250 ms), so the healthy
// subscribers of the same host:port are served long before the hanging ones time out (1.3 s
// after the first hanging request here). Counted until their timeout, as before the overdue
// rule, they held every slot for the whole 6 s (12.3 s with that rule taken out).
TEST(DrainLimits, RequestsHangingAtOneSubscriberDoNotHoldTheOriginFromTheOthers) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path(), {.behaviours_json = R"({"1": {"hang": true}})"});
  // The healthy rows fall due a second in, when the hanging requests hold the slots.
  const auto hanging = queue_first_then_others(queue, sink, 16, 4, 100).first;
  ASSERT_EQ(hanging, 1);
  const auto result =
      run_surge(dir, {"drain", "--db", queue.path(), "--allow-private-targets", "--until-drained",
                      "--threads", "1", "--max-attempts", "1", "--attempt-timeout", "6", "--lease",
                      "30", "--progress-interval", "0"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto requests = sink.stop_and_read();
  double first_hang = std::numeric_limits<double>::max();
  double healthy_first = std::numeric_limits<double>::max();
  double healthy_last = 0;
  std::size_t healthy_requests = 0;
  for (const auto& r : requests) {
    if (r.subscriber_id == hanging) {
      first_hang = std::min(first_hang, r.arrival);
    } else {
      healthy_first = std::min(healthy_first, r.arrival);
      healthy_last = std::max(healthy_last, r.arrival);
      ++healthy_requests;
    }
  }
  ASSERT_LT(first_hang, std::numeric_limits<double>::max()) << "no hanging request arrived";
  // The case under test: the hanging requests held at least the limit's first 8 slots before
  // any healthy row was due.
  const auto hung_first = std::count_if(requests.begin(), requests.end(), [&](const auto& r) {
    return r.subscriber_id == hanging && r.arrival < healthy_first;
  });
  EXPECT_GE(hung_first, 8);
  EXPECT_EQ(healthy_requests, 400u);
  EXPECT_EQ(queue.count_by_status()["done"], 400);
  EXPECT_EQ(queue.count_by_status()["dead"], 16) << "each hanging row timed out once";
  RecordProperty("healthy_done_after_first_hang_ms",
                 static_cast<int>((healthy_last - first_hang) * 1000));
  EXPECT_LT(healthy_last - first_hang, 5.0)
      << "the healthy subscribers waited for the hanging requests' 6 s timeout";
}

}  // namespace
}  // namespace surge::testing

namespace surge::testing {
namespace {

// --max-in-flight caps requests across all subscribers: with 2 slots and a receiver that takes
// 200 ms, at most ~10 requests start per second, and every subscriber queued for a slot is
// served in turn.
TEST(DrainLimits, TheProcessWideInFlightCapHoldsAndServesEveryWaitingSubscriber) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path(), {.behaviours_json = R"({"*": {"delay_ms": 200}})"});
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(queue.add_subscriber_at(sink, 1000, 100));
    queue.add_rows(ids.back(), 5);
  }
  const auto result =
      run_surge(dir, {"drain", "--db", queue.path(), "--allow-private-targets", "--until-drained",
                      "--threads", "1", "--max-in-flight", "2", "--progress-interval", "0"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto requests = sink.stop_and_read();
  EXPECT_EQ(deliveries(requests).size(), 20u);
  std::vector<double> arrivals;
  for (const auto& r : requests) arrivals.push_back(r.arrival);
  // Two slots of 200 ms: 10 per second, one more for the window's edge.
  EXPECT_LE(max_in_window(arrivals, 1.0), 11);
  for (auto id : ids) {
    EXPECT_EQ(std::count_if(requests.begin(), requests.end(),
                            [&](const auto& r) { return r.subscriber_id == id; }),
              5);
  }
}

// Adaptive concurrency per origin: twenty unthrottled subscribers behind one origin could hold
// 20 x 16 = 320 requests, and so connections, open at once. Against a receiver that slows down
// by 2 ms per request it is answering, the origin limit (8 per shard at first, doubling only
// while latency stays near the best seen) keeps it to a few dozen (16 to 40 measured; the bound
// leaves room for slow sanitizer builds); with the limit off the receiver sees all 320, and so
// it does when --origin-latency-slack lets a second of queueing pass for normal.
TEST(DrainLimits, AnOriginThatSlowsUnderLoadGetsLessConcurrency) {
  const auto connections_with = [](const std::string& tolerance,
                                   const std::string& slack = "0.002") -> std::size_t {
    temp_dir dir;
    test_queue queue(dir);
    sink_process sink(dir, queue.path(),
                      {.behaviours_json = R"({"*": {"delay_per_request_ms": 2}})"});
    for (int i = 0; i < 20; ++i) queue.add_rows(queue.add_subscriber_at(sink, 1e6, 1'000'000), 100);
    const auto result =
        run_surge(dir, {"drain", "--db", queue.path(), "--allow-private-targets", "--until-drained",
                        "--threads", "2", "--origin-latency-tolerance", tolerance,
                        "--origin-latency-slack", slack, "--progress-interval", "0"});
    EXPECT_EQ(result.exit_code, 0) << result.err;
    const auto requests = sink.stop_and_read();
    EXPECT_EQ(deliveries(requests).size(), 2000u) << "tolerance " << tolerance;
    std::set<std::uint64_t> connections;
    for (const auto& r : requests) connections.insert(r.connection_id);
    return connections.size();
  };
  const auto limited = connections_with("2");
  const auto unlimited = connections_with("0");
  const auto slack_of_a_second = connections_with("2", "1");
  RecordProperty("connections_limited", static_cast<int>(limited));
  RecordProperty("connections_unlimited", static_cast<int>(unlimited));
  RecordProperty("connections_slack_of_a_second", static_cast<int>(slack_of_a_second));
  EXPECT_LE(limited, 96u) << "with the limit off: " << unlimited;
  EXPECT_GT(unlimited, 250u) << "with the limit on: " << limited;
  EXPECT_GT(slack_of_a_second, 250u) << "with 2 ms of slack: " << limited;
}

// Slots of a busy origin go round in turn. A subscriber with a big backlog holds every slot of
// the origin's limit (the receiver answers 500 requests a second, however many are open, so the
// limit stays small) when ten small subscribers of the same host get rows. A freed slot goes to
// the head of the origin's queue: the big one cannot take each one back as its attempt finishes
// and make the others wait for the rest of its backlog (which they did before: 0 of its 3,000
// deliveries came after theirs; now about 2,400 do).
TEST(DrainLimits, AnOriginsSlotsGoRoundInTurnBetweenItsSubscribers) {
  temp_dir dir;
  test_queue queue(dir);
  sink_process sink(dir, queue.path(),
                    {.behaviours_json = R"({"*": {"delay_per_request_ms": 2}})"});
  // The small ones' rows fall due a second into the drain, when the big one holds the slots.
  const auto heavy = queue_first_then_others(queue, sink, 3000, 10, 20).first;
  // Its own cap is above anything the origin limit reaches here, so only the origin's queue
  // decides who sends.
  const auto result =
      run_surge(dir, {"drain", "--db", queue.path(), "--allow-private-targets", "--until-drained",
                      "--until-drained-wait", "5", "--threads", "1", "--per-subscriber-in-flight",
                      "64", "--origin-latency-tolerance", "2", "--progress-interval", "0"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto requests = sink.stop_and_read();
  ASSERT_EQ(deliveries(requests).size(), 3200u);
  double light_last = 0;
  for (const auto& r : requests) {
    if (r.subscriber_id != heavy) light_last = std::max(light_last, r.arrival);
  }
  const auto heavy_after = std::count_if(requests.begin(), requests.end(), [&](const auto& r) {
    return r.subscriber_id == heavy && r.arrival > light_last;
  });
  RecordProperty("heavy_after_light_done", static_cast<int>(heavy_after));
  // In turn, the 200 small rows go out within about a second of falling due, while most of the
  // 3,000 (6 s at 500/s) are still to come; taken back by whoever finished, they would wait for
  // the end of the backlog.
  EXPECT_GE(heavy_after, 1000);
}

}  // namespace
}  // namespace surge::testing
