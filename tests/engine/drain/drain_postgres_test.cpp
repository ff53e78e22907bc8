// `surge` on a PostgreSQL queue through the real CLI: a wrong URI or an
// unreachable server is a clear error at the start, a server restarted mid-drain costs a few
// failed cycles and loses nothing, and `prune`, SQLite-only so far, says so.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "proto/clock.hpp"
#include "storage/sqlite/database.hpp"
#include "tests/support/backends.hpp"
#include "tests/support/e2e.hpp"
#include "tests/support/postgres_server.hpp"
#include "tests/support/sql_client.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(DrainPostgres, AWrongUriOrAnUnreachableServerIsAClearErrorAtTheStart) {
  temp_dir dir;
  const std::string nowhere = "postgresql:///queue?host=" + dir.path().string() + "&port=1";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"drain", "--db", nowhere, "--until-drained"},
        std::vector<std::string>{"stats", "--db", nowhere},
        std::vector<std::string>{"migrate", "--db", nowhere},
        std::vector<std::string>{"emit", "--db", nowhere, "--type", "t", "--data", "{}"}}) {
    const auto result = run_surge(dir, args);
    EXPECT_EQ(result.exit_code, 1) << args[0] << ": " << result.err;
    EXPECT_NE(result.err.find("cannot connect to PostgreSQL at postgresql:///queue"),
              std::string::npos)
        << args[0] << ": " << result.err;
  }
  const auto bad_scheme = run_surge(dir, {"stats", "--db", "postgresql://[::1"});
  EXPECT_EQ(bad_scheme.exit_code, 1);
  EXPECT_NE(bad_scheme.err.find("PostgreSQL"), std::string::npos) << bad_scheme.err;
}

TEST(DrainPostgres, PruneIsSQLiteOnlyAndSaysSo) {
  SURGE_REQUIRE_POSTGRES(server);
  temp_dir dir;
  test_queue queue(test_queue::at_location{server->create_database()});
  const auto result = run_surge(dir, {"prune", "--db", queue.path(), "--older-than", "30d"});
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.err.find("not available on a PostgreSQL queue yet"), std::string::npos)
      << result.err;
}

TEST(DrainPostgres, AServerRestartedMidDrainLosesNothing) {
  SURGE_REQUIRE_POSTGRES(server);
  temp_dir dir;
  test_queue queue(test_queue::at_location{server->create_database()});
  sink_process sink(dir, queue.path());
  constexpr int rows_each = 150;
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 2; ++i) {
    ids.push_back(queue.add_subscriber_at(sink, 50, 5));
    queue.add_rows(ids.back(), rows_each);
  }
  tools::child_process drain(surge_binary(),
                             {"drain", "--db", queue.path(), "--until-drained",
                              "--allow-private-targets", "--progress-interval", "0"},
                             dir.file("drain.out"), dir.file("drain.err"));
  ASSERT_TRUE(eventually([&] { return queue.count_by_status()["done"] > 0; }, 20s))
      << "the drain delivered nothing";
  server->stop();
  std::this_thread::sleep_for(1500ms);
  server->start();
  ASSERT_EQ(drain.wait(120s).value_or(-1), 0) << read_file(dir.file("drain.err"));
  const auto requests = sink.stop_and_read();

  sql_client check(queue.path());
  EXPECT_EQ(check.number("SELECT COUNT(*) FROM webhook_delivery WHERE status = 'done'"),
            2 * rows_each);
  const auto per_delivery = deliveries(requests);
  EXPECT_EQ(per_delivery.size(), static_cast<std::size_t>(2 * rows_each));
  const auto err = read_file(dir.file("drain.err"));
  EXPECT_NE(err.find("will retry"), std::string::npos) << "the outage was noticed: " << err;
  const auto out = read_file(dir.file("drain.out"));
  EXPECT_EQ(out.find("storage_errors=0"), std::string::npos) << out;
}

// A server crash (an immediate shutdown: no checkpoint, its WAL buffers lost) shorter than the
// lease sends nothing twice: every outcome the drain was told is committed survives it.
TEST(DrainPostgres, AServerCrashMidDrainSendsNothingTwice) {
  SURGE_REQUIRE_POSTGRES(server);
  temp_dir dir;
  test_queue queue(test_queue::at_location{server->create_database()});
  sink_process sink(dir, queue.path());
  constexpr int rows_each = 1500;
  for (int i = 0; i < 2; ++i) queue.add_rows(queue.add_subscriber_at(sink, 500, 50), rows_each);
  tools::child_process drain(surge_binary(),
                             {"drain", "--db", queue.path(), "--until-drained",
                              "--allow-private-targets", "--progress-interval", "0"},
                             dir.file("drain.out"), dir.file("drain.err"));
  // Sending a thousand rows a second once it delivers.
  ASSERT_TRUE(eventually([&] { return queue.count_by_status()["done"] > 0; }, 20s))
      << "the drain delivered nothing";
  server->crash();
  std::this_thread::sleep_for(2s);
  server->start();
  ASSERT_EQ(drain.wait(120s).value_or(-1), 0) << read_file(dir.file("drain.err"));
  const auto requests = sink.stop_and_read();
  const auto per_delivery = deliveries(requests);
  EXPECT_EQ(per_delivery.size(), static_cast<std::size_t>(2 * rows_each));
  int twice = 0;
  for (const auto& [id, count] : per_delivery) twice += count > 1 ? 1 : 0;
  EXPECT_EQ(twice, 0) << "rows sent more than once after the crash";
  if (twice > 0) {
    for (const auto& r : requests) {
      if (per_delivery.at(r.delivery_id) > 1) {
        std::cerr << "delivery " << r.delivery_id << " attempt " << r.attempt << " at "
                  << std::fixed << r.arrival << "\n";
      }
    }
    std::cerr << read_file(dir.file("drain.err"));
  }
  sql_client check(queue.path());
  EXPECT_EQ(check.number("SELECT COUNT(*) FROM webhook_delivery WHERE status = 'done'"),
            2 * rows_each);
}

// A database dropped while draining does not come back: the drain ends with exit 1 and says so,
// as it does for a deleted SQLite file, instead of retrying for ever.
TEST(DrainPostgres, ADatabaseDroppedMidDrainEndsItWithExitOne) {
  SURGE_REQUIRE_POSTGRES(server);
  temp_dir dir;
  const auto location = server->create_database();
  const auto name =
      location.substr(location.find("///") + 3, location.find('?') - location.find("///") - 3);
  std::optional<test_queue> queue(std::in_place, test_queue::at_location{location});
  sink_process sink(dir, queue->path());
  queue->add_rows(queue->add_subscriber_at(sink, 20, 5), 2000);
  queue.reset();  // the test's own session would keep the database
  tools::child_process drain(surge_binary(),
                             {"drain", "--db", location, "--until-drained",
                              "--allow-private-targets", "--progress-interval", "0"},
                             dir.file("drain.out"), dir.file("drain.err"));
  // Draining: the test checks only how it ends. Each look is a session of its own, closed at
  // once, since one left open would keep the database.
  ASSERT_TRUE(eventually(
      [&] {
        return sql_client(location).number(
                   "SELECT COUNT(*) FROM webhook_delivery WHERE status = 'done'") > 0;
      },
      20s, 100ms))
      << "the drain delivered nothing";
  sql_client(server->uri("postgres")).exec("DROP DATABASE " + name + " WITH (FORCE)");
  EXPECT_EQ(drain.wait(60s).value_or(-1), 1) << read_file(dir.file("drain.err"));
  const auto err = read_file(dir.file("drain.err"));
  EXPECT_NE(err.find("the queue's database no longer exists"), std::string::npos) << err;
  EXPECT_NE(err.find("\"" + name + "\" does not exist"), std::string::npos) << err;
}

}  // namespace
}  // namespace surge::testing
