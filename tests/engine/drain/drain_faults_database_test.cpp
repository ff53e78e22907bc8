// Faults of the database itself, through the real CLI against a real PostgreSQL server and real
// SQLite files: another session holding locks, a server that is silent or frozen, a role's own
// statement timeout, a queue the drain may not write, Surge's own tables dropped, and the
// write-ahead log deleted. None may stop the other subscribers, hang the drain, or let it exit 0
// with outcomes missing (docs/reliability.md).
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "storage/sqlite/database.hpp"
#include "tests/engine/drain/drain_faults_support.hpp"
#include "tests/support/backends.hpp"
#include "tests/support/e2e.hpp"
#include "tests/support/postgres_server.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;
constexpr auto npos = std::string::npos;

std::int64_t done_of(sql_client& sql, std::int64_t subscriber) {
  return static_cast<std::int64_t>(sql.number(
      "SELECT COUNT(*) FROM webhook_delivery WHERE status = 'done' AND subscriber_id = ?",
      {std::to_string(subscriber)}));
}

std::vector<std::string> drain_args(const std::string& location,
                                    std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"drain",
                                "--db",
                                location,
                                "--until-drained",
                                "--allow-private-targets",
                                "--progress-interval",
                                "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// The same database as `uri` through another role.
std::string as_role(const std::string& uri, const std::string& role) {
  const auto at = uri.find("user=");
  return uri.substr(0, at) + "user=" + role;
}

// --- another session's locks --------------------------------------------------------------

// An operator's psql session updates one subscriber and leaves its transaction open. Before,
// every storage cycle waited on that row's lock, so no subscriber received anything.
TEST(DrainFaultsDatabase, ASubscriberRowLockedByAnotherSessionHoldsBackOnlyThatSubscriber) {
  SURGE_REQUIRE_POSTGRES(server);
  temp_dir dir;
  test_queue queue(test_queue::at_location{server->create_database()});
  sink_process sink(dir, queue.path());
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(queue.add_subscriber_at(sink, 40, 5));
    queue.add_rows(ids.back(), 80);
  }
  sql_client operator_session(queue.path());
  operator_session.begin();
  operator_session.exec("UPDATE webhook_subscriber SET url = url WHERE id = ?",
                        {std::to_string(ids[2])});
  tools::child_process drain(surge_binary(), drain_args(queue.path()), dir.file("drain.out"),
                             dir.file("drain.err"));
  const bool others_done = eventually(
      [&] { return done_of(queue.sql(), ids[0]) == 80 && done_of(queue.sql(), ids[1]) == 80; }, 60s,
      200ms);
  const auto held_done = done_of(queue.sql(), ids[2]);
  operator_session.commit();
  ASSERT_EQ(drain.wait(60s).value_or(-1), 0) << read_file(dir.file("drain.err"));
  const auto err = read_file(dir.file("drain.err"));
  EXPECT_TRUE(others_done) << "the others kept flowing while the row was locked: " << err;
  EXPECT_EQ(held_done, 0) << "the locked subscriber's bucket cannot be spent";
  EXPECT_NE(err.find("subscriber " + std::to_string(ids[2]) + ": the subscriber row is locked"),
            npos)
      << err;
  EXPECT_EQ(done_of(queue.sql(), ids[2]), 80) << "and it goes out once the lock is gone";
}

// A session locks three rows the drain has leased and is sending. Before, the outcome batch
// waited on their locks and every other outcome and claim waited behind it.
TEST(DrainFaultsDatabase, LeasedRowsLockedByAnotherSessionHoldBackOnlyTheirOwnOutcomes) {
  SURGE_REQUIRE_POSTGRES(server);
  temp_dir dir;
  test_queue queue(test_queue::at_location{server->create_database()});
  sink_process sink(dir, queue.path(), {.behaviours_json = R"({"*": {"delay_ms": 300}})"});
  const auto id = queue.add_subscriber_at(sink, 1000, 100);
  constexpr int rows = 300;
  queue.add_rows(id, rows);
  tools::child_process drain(surge_binary(), drain_args(queue.path()), dir.file("drain.out"),
                             dir.file("drain.err"));
  sql_client other(queue.path());
  std::vector<sql_client::row> locked;
  ASSERT_TRUE(eventually(
      [&] {
        other.begin();
        locked = other.query(
            "SELECT id FROM webhook_delivery WHERE status = 'pending' AND locked_until > "
            "extract(epoch from clock_timestamp()) ORDER BY id LIMIT 3 FOR UPDATE");
        if (locked.size() == 3) return true;
        other.commit();
        return false;
      },
      30s, 50ms));
  const bool others_done =
      eventually([&] { return done_of(queue.sql(), id) >= rows - 3; }, 60s, 200ms);
  other.commit();
  ASSERT_EQ(drain.wait(60s).value_or(-1), 0) << read_file(dir.file("drain.err"));
  const auto err = read_file(dir.file("drain.err"));
  EXPECT_TRUE(others_done) << err;
  EXPECT_NE(err.find("locked by another database session"), npos) << err;
  EXPECT_EQ(done_of(queue.sql(), id), rows);
  const auto per_delivery = deliveries(sink.stop_and_read());
  EXPECT_EQ(per_delivery.size(), static_cast<std::size_t>(rows));
  for (const auto& [delivery, count] : per_delivery) EXPECT_EQ(count, 1) << delivery;
}

// --- a server that does not answer -----------------------------------------------------------

// A listening socket that is never accepted from: the kernel completes the handshake and the
// client waits for a PostgreSQL greeting that never comes. Before, every command hung for ever.
TEST(DrainFaultsDatabase, APortThatAcceptsAndNeverAnswersIsAnErrorWithinTheConnectTimeout) {
  temp_dir dir;
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(listener, 16), 0);
  socklen_t length = sizeof address;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  const std::string silent =
      "postgresql://surge@127.0.0.1:" + std::to_string(ntohs(address.sin_port)) + "/queue";
  std::vector<std::unique_ptr<tools::child_process>> commands;
  const std::vector<std::vector<std::string>> each = {
      {"stats", "--db", silent}, {"migrate", "--db", silent}, drain_args(silent)};
  for (std::size_t i = 0; i < each.size(); ++i) {
    commands.push_back(std::make_unique<tools::child_process>(
        surge_binary(), each[i], dir.file(std::to_string(i) + ".out"),
        dir.file(std::to_string(i) + ".err")));
  }
  for (std::size_t i = 0; i < each.size(); ++i) {
    const auto code = commands[i]->wait(60s);
    const auto err = read_file(dir.file(std::to_string(i) + ".err"));
    ASSERT_TRUE(code.has_value()) << each[i][0] << " hung on a silent server";
    EXPECT_EQ(*code, 1) << each[i][0] << ": " << err;
    EXPECT_NE(err.find("no answer within 10 s"), npos) << each[i][0] << ": " << err;
  }
  ::close(listener);
}

// Every server process stopped (SIGSTOP) while the drain runs: the grace period still bounds the
// stop. Before, the drain sat in a libpq call and was still running 20 s after SIGTERM.
TEST(DrainFaultsDatabase, TheGracePeriodHoldsWhileTheServerIsFrozen) {
  postgres_server::binaries bins;
  std::string why_not;
  if (!postgres_server::find_binaries(bins, &why_not)) GTEST_SKIP() << why_not;
  postgres_server server(bins);
  temp_dir dir;
  test_queue queue(test_queue::at_location{server.create_database()});
  sink_process sink(dir, queue.path(), {.behaviours_json = R"({"*": {"delay_ms": 50}})"});
  const auto id = queue.add_subscriber_at(sink, 200, 20);
  queue.add_rows(id, 2000);
  tools::child_process drain(surge_binary(), drain_args(queue.path(), {"--grace", "3"}),
                             dir.file("drain.out"), dir.file("drain.err"));
  ASSERT_TRUE(wait_for_requests(sink, 20, 30s));
  server.signal_all(SIGSTOP);
  std::this_thread::sleep_for(1s);
  drain.signal(SIGTERM);
  const auto code = drain.wait(20s);
  server.signal_all(SIGCONT);
  const auto err = read_file(dir.file("drain.err"));
  ASSERT_TRUE(code.has_value()) << "the drain outlived its grace period: " << err;
  // Outcomes the frozen server never took: not a clean exit, and their rows go out again.
  EXPECT_EQ(*code, 1) << err;
  const auto out = read_file(dir.file("drain.out"));
  EXPECT_NE(out.find("remaining=unknown"), npos) << "a count the server never gave: " << out;
}

// --- a queue the drain may not write -------------------------------------------------------

// A role that may only read, and one whose transactions are read-only by default (as on a
// standby): before, the drain ran for ever logging failed renewals and delivered nothing.
TEST(DrainFaultsDatabase, AReadOnlyRoleIsAnErrorAtTheStartThatNamesTheFix) {
  SURGE_REQUIRE_POSTGRES(server);
  temp_dir dir;
  test_queue queue(test_queue::at_location{server->create_database()});
  const auto id = queue.add_subscriber("http://127.0.0.1:9/hook", 10, 10);
  queue.add_rows(id, 5);
  auto& sql = queue.sql();
  sql.exec(
      "DO $$ BEGIN CREATE ROLE reader LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; "
      "END $$");
  sql.exec("GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader");
  sql.exec(
      "DO $$ BEGIN CREATE ROLE standby LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; "
      "END $$");
  sql.exec("GRANT ALL ON ALL TABLES IN SCHEMA public TO standby");
  sql.exec("ALTER ROLE standby SET default_transaction_read_only = on");
  for (const std::string role : {"reader", "standby"}) {
    const auto result = run_surge(dir, drain_args(as_role(queue.path(), role)), 60s);
    EXPECT_EQ(result.exit_code, 1) << role << ": " << result.err;
    EXPECT_NE(result.err.find("refuses this drain's writes"), npos) << role << ": " << result.err;
    EXPECT_NE(result.err.find("a role that may SELECT, INSERT, UPDATE and DELETE"), npos)
        << role << ": " << result.err;
  }
}

// A queue file the drain's user may read but not write: SQLite opens it read-only without a
// word. Run as `nobody` (root writes any file).
TEST(DrainFaultsDatabase, AReadOnlyQueueFileIsAnErrorAtTheStartThatNamesTheFix) {
  if (::access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "setpriv (util-linux) missing";
  temp_dir dir;
  std::string file;
  {
    test_queue queue(dir, "source.db");
    const auto id = queue.add_subscriber("http://127.0.0.1:9/hook", 10, 10);
    queue.add_rows(id, 5);
    queue.db().exec("PRAGMA wal_checkpoint(TRUNCATE)");
    file = dir.file("readonly.db");
    std::filesystem::copy_file(queue.path(), file);
  }
  ::chmod(dir.path().c_str(), 0777);
  ::chmod(file.c_str(), 0444);
  std::vector<std::string> args{"--reuid=65534", "--regid=65534", "--clear-groups", "--",
                                surge_binary()};
  for (auto& arg : drain_args(file)) args.push_back(arg);
  tools::child_process drain("/usr/bin/setpriv", args, dir.file("drain.out"),
                             dir.file("drain.err"));
  const auto code = drain.wait(60s);
  const auto err = read_file(dir.file("drain.err"));
  ASSERT_TRUE(code.has_value()) << "ran on without writing: " << err;
  EXPECT_EQ(*code, 1) << err;
  EXPECT_NE(err.find("opened read-only"), npos) << err;
  EXPECT_NE(err.find("needs write access to " + file), npos) << err;
}

// Surge's own table of subscriber owners dropped mid-drain: the drain stops at once, naming
// `surge migrate`, which puts the table back.
class DrainFaultsDatabaseOn : public ::testing::TestWithParam<backend> {};

TEST_P(DrainFaultsDatabaseOn, OwnTablesDroppedMidDrainStopItAndMigrateRepairsThem) {
  temp_dir dir;
  SURGE_QUEUE_FOR(GetParam(), dir, queue_held);
  auto& queue = *queue_held;
  sink_process sink(dir, queue.path(), {.behaviours_json = R"({"*": {"delay_ms": 20}})"});
  const auto id = queue.add_subscriber_at(sink, 200, 20);
  queue.add_rows(id, 1000);
  tools::child_process drain(surge_binary(), drain_args(queue.path()), dir.file("drain.out"),
                             dir.file("drain.err"));
  ASSERT_TRUE(wait_for_requests(sink, 10, 30s));
  queue.sql().exec("DROP TABLE surge_owner");
  const auto code = drain.wait(30s);
  const auto err = read_file(dir.file("drain.err"));
  ASSERT_TRUE(code.has_value()) << "errors repeated until killed: " << err;
  EXPECT_EQ(*code, 1) << err;
  EXPECT_NE(err.find("surge_owner"), npos) << err;
  EXPECT_NE(err.find("Run `surge migrate --db"), npos) << err;

  const auto migrated = run_surge(dir, {"migrate", "--db", queue.path()});
  ASSERT_EQ(migrated.exit_code, 0) << migrated.err;
  const auto again = run_surge(dir, drain_args(queue.path()), 90s);
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(done_of(queue.sql(), id), 1000);
}

INSTANTIATE_TEST_SUITE_P(Backends, DrainFaultsDatabaseOn, all_backends(), backend_name);

// The queue file's write-ahead log deleted mid-drain. Before, the drain went on, exited 0, and
// the file held none of the outcomes it had written since: those rows would be sent twice.
TEST(DrainFaultsDatabase, ADeletedWriteAheadLogStopsTheDrainAndItsOutcomesStillReachTheFile) {
  temp_dir dir;
  std::string path;
  std::int64_t id = 0;
  {
    // The test's own connections are closed before the drain starts: an old connection would
    // keep the deleted log open and hide what the drain did.
    test_queue queue(dir);
    path = queue.path();
    id = queue.add_subscriber("http://127.0.0.1:9/hook", 300, 30);
    queue.add_rows(id, 2000);
  }
  sink_process sink(dir, path, {.behaviours_json = R"({"*": {"delay_ms": 20}})"});
  sql_client(path).exec("UPDATE webhook_subscriber SET url = ? WHERE id = ?",
                        {sink.url_for(id), std::to_string(id)});
  tools::child_process drain(surge_binary(), drain_args(path), dir.file("drain.out"),
                             dir.file("drain.err"));
  ASSERT_TRUE(wait_for_requests(sink, 100, 30s));
  std::filesystem::remove(path + "-wal");
  const auto code = drain.wait(30s);
  const auto requests = sink.stop_and_read();
  const auto err = read_file(dir.file("drain.err"));
  ASSERT_TRUE(code.has_value()) << err;
  EXPECT_EQ(*code, 1) << err;
  EXPECT_NE(err.find("write-ahead log " + path + "-wal was deleted"), npos) << err;
  std::set<std::int64_t> answered;
  for (const auto& request : requests) {
    if (request.status == 200) answered.insert(request.delivery_id);
  }
  ASSERT_FALSE(answered.empty());
  // Read by a connection opened now, after every other one closed: what the file holds.
  sql_client fresh(path);
  const auto done = fresh.query("SELECT id FROM webhook_delivery WHERE status = 'done'");
  std::set<std::int64_t> done_ids;
  for (const auto& row : done) done_ids.insert(std::stoll(*row[0]));
  EXPECT_EQ(done_ids, answered) << "every row the partner answered is done in the file";
}

}  // namespace
}  // namespace surge::testing
