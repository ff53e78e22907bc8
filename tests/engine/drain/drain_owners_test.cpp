// Several `surge drain` processes on one queue: each subscriber is
// owned by one drain at a time, the subscribers are spread over the drains, and a drain killed
// with SIGKILL is taken over by the others: nothing lost, duplicates bounded by what it held, no
// subscriber above its limit in any window.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "proto/clock.hpp"
#include "storage/sqlite/database.hpp"
#include "tests/support/backends.hpp"
#include "tests/support/e2e.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;

constexpr double rate = 20;
constexpr int burst = 5;
constexpr int subscriber_count = 9;
// 11.75 s of backlog per subscriber at its limit: the kill must come while the victim's
// subscribers still have rows, after three drains that may start seconds apart on a loaded
// machine have split them.
constexpr int rows_each = 240;

// Subscriber ids owned by each live drain, keyed by its pid.
std::map<int, std::set<std::int64_t>> owners_by_pid(sql_client& sql) {
  std::map<int, std::set<std::int64_t>> out;
  for (const auto& row :
       sql.query("SELECT o.drainer, o.subscriber_id FROM surge_owner o JOIN surge_drainer d "
                 "ON d.name = o.drainer WHERE d.expires_at > ?",
                 {std::to_string(proto::unix_now())})) {
    const std::string name = row[0].value_or("");
    out[std::stoi(name.substr(name.rfind(':') + 1))].insert(std::stoll(row[1].value_or("0")));
  }
  return out;
}

// The same on both kinds of queue: three processes on one host share a SQLite file through its
// write lock, or a PostgreSQL database as drains on several hosts would.
class DrainOwners : public ::testing::TestWithParam<backend> {};

TEST_P(DrainOwners, ThreeDrainsShareTheSubscribersAndTakeOverAKilledOne) {
  temp_dir dir;
  SURGE_QUEUE_FOR(GetParam(), dir, queue_held);
  test_queue& queue = *queue_held;
  sink_process sink{dir, queue.path()};
  std::vector<std::int64_t> ids;
  for (int i = 0; i < subscriber_count; ++i) {
    ids.push_back(queue.add_subscriber_at(sink, rate, burst));
    queue.add_rows(ids.back(), rows_each);
  }
  const std::vector<std::string> args = {"drain",
                                         "--db",
                                         queue.path(),
                                         "--allow-private-targets",
                                         "--until-drained",
                                         "--lease",
                                         "5",
                                         "--attempt-timeout",
                                         "2",
                                         "--connect-timeout",
                                         "1",
                                         "--progress-interval",
                                         "0"};
  std::vector<std::unique_ptr<tools::child_process>> drains;
  for (const char* name : {"a", "b", "c"}) {
    drains.push_back(std::make_unique<tools::child_process>(surge_binary(), args,
                                                            dir.file(std::string(name) + ".out"),
                                                            dir.file(std::string(name) + ".err")));
  }

  // The subscribers spread three and three and three within a few renewals.
  std::map<int, std::set<std::int64_t>> owners;
  for (int i = 0; i < 100; ++i) {
    owners = owners_by_pid(queue.sql());
    if (owners.size() == 3 && std::all_of(owners.begin(), owners.end(),
                                          [](const auto& o) { return o.second.size() == 3; })) {
      break;
    }
    std::this_thread::sleep_for(100ms);
  }
  for (const auto& drain : drains) {
    ASSERT_FALSE(drain->wait(0ms).has_value())
        << "a drain exited early; see its .err in " << dir.path();
  }
  ASSERT_EQ(owners.size(), 3u) << "three live drains own subscribers";
  std::set<std::int64_t> covered;
  for (const auto& [pid, owned] : owners) {
    EXPECT_EQ(owned.size(), 3u) << "drain " << pid;
    covered.insert(owned.begin(), owned.end());
  }
  EXPECT_EQ(covered.size(), ids.size()) << "every subscriber is owned by exactly one drain";

  // `surge stats` names the owners.
  const auto stats = run_surge(dir, {"stats", "--db", queue.path()});
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  for (const auto& drain : drains) {
    EXPECT_NE(stats.out.find(":" + std::to_string(drain->pid())), std::string::npos) << stats.out;
  }

  // Kill one while the backlog lasts.
  std::this_thread::sleep_for(1s);
  auto& victim = *drains[1];
  const auto victim_owned = owners_by_pid(queue.sql())[victim.pid()];
  victim.signal(SIGKILL);
  const double killed_at = proto::unix_now();
  ASSERT_EQ(victim.wait(10s).value_or(-1), 128 + SIGKILL);
  // What it held: rows still under a lease it recorded. Only these may be sent twice.
  const auto held = static_cast<std::int64_t>(queue.sql().number(
      "SELECT COUNT(*) FROM webhook_delivery d JOIN surge_lease l ON d.locked_until = l.lease "
      "WHERE l.owner LIKE ? AND d.status IN ('pending','retry')",
      {"%:" + std::to_string(victim.pid())}));

  for (const std::size_t survivor : {0u, 2u}) {
    ASSERT_EQ(drains[survivor]->wait(120s).value_or(-1), 0) << "drain " << survivor;
  }
  const auto requests = sink.stop_and_read();

  // Nothing lost: every row done.
  const auto by_status = queue.count_by_status();
  EXPECT_EQ(by_status.at("done"), subscriber_count * rows_each);
  EXPECT_EQ(by_status.size(), 1u);
  // Duplicates bounded by what the dead drain held.
  int duplicates = 0;
  for (const auto& [delivery, count] : deliveries(requests)) duplicates += count - 1;
  std::printf("the killed drain held %lld rows; %d were sent twice\n", static_cast<long long>(held),
              duplicates);
  EXPECT_LE(duplicates, held);

  // Its subscribers resumed: each got a request after the kill. That they are taken once the
  // dead drain's heartbeat expires (4 s) is the ownership rule, proved without a clock
  // (Ownership.ADeadDrainersSubscribersAreTakenOnceItsHeartbeatExpires); how soon here is
  // printed, not judged, since a loaded machine only makes it later.
  std::map<std::int64_t, std::vector<double>> arrivals;
  for (const auto& r : requests) arrivals[r.subscriber_id].push_back(r.arrival);
  double worst_takeover = 0;
  for (const auto id : victim_owned) {
    auto& times = arrivals[id];
    std::sort(times.begin(), times.end());
    const auto after = std::upper_bound(times.begin(), times.end(), killed_at + 0.2);
    ASSERT_NE(after, times.end()) << "subscriber " << id << " never resumed";
    worst_takeover = std::max(worst_takeover, *after - killed_at);
  }
  std::printf("the killed drain's %zu subscribers resumed within %.2f s\n", victim_owned.size(),
              worst_takeover);

  // No subscriber above its limit in any window, across all three drains, as the receiver
  // counts arrivals: plus one for clock granularity, and the refill of the transport's measured
  // spread (a sanitized build on two busy cores delivers two processes' requests late and
  // bunched).
  for (const double window : {1.0, 2.0}) {
    int worst = 0;
    for (const auto id : ids) {
      const auto transit = transit_spread(requests, id, attempt_starts(queue, id));
      const int most = max_in_window(arrivals[id], window);
      worst = std::max(worst, most);
      EXPECT_LE(most, burst + rate * (window + transit.spread) + 1)
          << "subscriber " << id << ", window " << window << " s, transit spread " << transit.spread
          << " s";
    }
    std::printf("at most %d requests to one subscriber in a window of %.0f s (limit %.0f)\n", worst,
                window, burst + rate * window);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DrainOwners, all_backends(), backend_name);

}  // namespace
}  // namespace surge::testing
