// Rows queued by another program while a drain idles are sent at once, not at the subscriber's
// next idle poll (the storage thread watches PRAGMA data_version and wakes shards).
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "tests/support/e2e.hpp"
#include "tests/support/http_get.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;

double sample(const std::string& exposition, const std::string& name) {
  const std::regex line("(^|\n)" + name + " (\\S+)");
  std::smatch match;
  if (!std::regex_search(exposition, match, line)) return -1;
  return std::stod(match[2]);
}

// Polls the queue (not the clock of the drain): generous, since only a stalled machine makes
// the wake take more than milliseconds, and without the wake the row waits an hour.
bool wait_until_done(test_queue& queue, std::int64_t id, std::chrono::seconds limit) {
  return eventually([&] { return queue.row(id).status == "done"; }, limit);
}

TEST(DrainWake, ARowQueuedWhileTheDrainIdlesIsSentWithoutWaitingForAPoll) {
  temp_dir dir;
  test_queue queue{dir};
  sink_process sink{dir, queue.path()};
  const auto sub = queue.add_subscriber_at(sink, 1000, 100);
  const auto first = queue.add_rows(sub, 1).front();
  // An hour between idle polls: the claim that takes `first` asks for more rows than there are,
  // so from then on only a wake can claim anything for this subscriber during the test.
  tools::child_process drain(
      surge_binary(),
      {"drain", "--db", queue.path(), "--allow-private-targets", "--idle-poll-min", "3600",
       "--idle-poll-max", "3600", "--metrics-listen", "127.0.0.1:0", "--progress", "off"},
      dir.file("drain.out"), dir.file("drain.err"));
  const auto port = metrics_port_from_log(dir.file("drain.err"));
  ASSERT_NE(port, 0) << "no metrics address in the log";
  ASSERT_TRUE(wait_until_done(queue, first, 60s))
      << "the first row, claimed at start, was not sent";
  EXPECT_EQ(sample(http_get(port, "/metrics").body, "surge_new_row_wakes_total"), 0);

  // Another connection queues a row, as the web application does.
  const auto second = queue.add_rows(sub, 1).front();
  EXPECT_TRUE(wait_until_done(queue, second, 60s))
      << "a row queued while idle waited for the idle poll (status " << queue.row(second).status
      << ")";
  EXPECT_GE(sample(http_get(port, "/metrics").body, "surge_new_row_wakes_total"), 1);

  drain.signal(SIGTERM);
  EXPECT_EQ(drain.wait(30s).value_or(-1), 0);
  const auto requests = sink.stop_and_read();
  const auto per_row = deliveries(requests);
  EXPECT_EQ(per_row.count(first) ? per_row.at(first) : 0, 1);
  EXPECT_EQ(per_row.count(second) ? per_row.at(second) : 0, 1);
}

}  // namespace
}  // namespace surge::testing
