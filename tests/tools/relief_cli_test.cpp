// `surge subscriber add|set` with the batch and coalescing flags, and what `stats`
// shows of them, through the real binary on a real queue file. Values are read back with
// `subscriber list --json`, as a script would; refusals must leave the stored row unchanged.
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <SQLiteCpp/Statement.h>

#include "tests/support/e2e.hpp"

namespace surge::testing {
namespace {

boost::json::object listed(const temp_dir& dir, const std::string& db, std::int64_t id) {
  const auto result = run_surge(dir, {"subscriber", "list", "--db", db, "--json"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  const auto parsed = boost::json::parse(result.out);  // outlives the loop below
  for (const auto& entry : parsed.as_array()) {
    if (entry.at("id").as_int64() == id) return entry.as_object();
  }
  ADD_FAILURE() << "subscriber " << id << " not listed: " << result.out;
  return {};
}

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST(ReliefCli, AddStoresBatchAndCoalescingSettings) {
  temp_dir dir;
  test_queue queue(dir);
  const auto added =
      run_surge(dir, {"subscriber", "add", "--db", queue.path(), "--url", "https://a.example/h",
                      "--batch", "100", "--batch-bytes", "65536", "--batch-linger", "1.5",
                      "--coalesce", "/data/video_id", "--coalesce-window", "4.5",
                      "--coalesce-events", "video.rank_updated,video.views.*"});
  ASSERT_EQ(added.exit_code, 0) << added.err;
  const auto id = std::stoll(added.out);
  const auto row = listed(dir, queue.path(), id);
  EXPECT_EQ(row.at("batch_max").as_int64(), 100);
  EXPECT_EQ(row.at("batch_bytes").as_int64(), 65536);
  EXPECT_DOUBLE_EQ(row.at("batch_linger").to_number<double>(), 1.5);
  EXPECT_EQ(row.at("coalesce_key").as_string(), "/data/video_id");
  EXPECT_DOUBLE_EQ(row.at("coalesce_window").to_number<double>(), 4.5);
  EXPECT_EQ(row.at("coalesce_events").as_string(), "video.rank_updated,video.views.*");

  // The table says it too.
  const auto table = run_surge(dir, {"subscriber", "list", "--db", queue.path()});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("batch 100"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("coalesce /data/video_id"), std::string::npos) << table.out;
}

TEST(ReliefCli, AddWithoutTheFlagsLeavesBothOff) {
  temp_dir dir;
  test_queue queue(dir);
  const auto added =
      run_surge(dir, {"subscriber", "add", "--db", queue.path(), "--url", "https://a.example/h"});
  ASSERT_EQ(added.exit_code, 0) << added.err;
  const auto row = listed(dir, queue.path(), std::stoll(added.out));
  EXPECT_EQ(row.at("batch_max").as_int64(), 1);
  EXPECT_EQ(row.at("batch_bytes").as_int64(), 1'048'576);
  EXPECT_EQ(row.at("coalesce_key").as_string(), "");
  EXPECT_EQ(row.at("coalesce_events").as_string(), "*");
}

TEST(ReliefCli, SetChangesOnlyWhatIsGivenAndEmptyCoalesceTurnsItOff) {
  temp_dir dir;
  test_queue queue(dir);
  const auto id = queue.add_subscriber("https://a.example/h", 5, 10);
  const std::vector<std::string> set = {"subscriber", "set", "--db", queue.path(),
                                        std::to_string(id)};
  auto result = run_surge(dir, with(set, {"--batch", "500", "--batch-linger", "0"}));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  result = run_surge(dir, with(set, {"--coalesce", "/id", "--coalesce-window", "3600"}));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto row = listed(dir, queue.path(), id);
  EXPECT_EQ(row.at("batch_max").as_int64(), 500);
  EXPECT_DOUBLE_EQ(row.at("batch_linger").to_number<double>(), 0);
  EXPECT_EQ(row.at("coalesce_key").as_string(), "/id");
  EXPECT_DOUBLE_EQ(row.at("coalesce_window").to_number<double>(), 3600);
  EXPECT_DOUBLE_EQ(row.at("rate_per_sec").to_number<double>(), 5);

  result = run_surge(dir, with(set, {"--coalesce", "", "--batch", "1"}));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  row = listed(dir, queue.path(), id);
  EXPECT_EQ(row.at("coalesce_key").as_string(), "");
  EXPECT_EQ(row.at("batch_max").as_int64(), 1);
  EXPECT_DOUBLE_EQ(row.at("coalesce_window").to_number<double>(), 3600) << "kept for later";
}

TEST(ReliefCli, BadValuesAreRefusedWithExitTwoNamingTheFlag) {
  temp_dir dir;
  test_queue queue(dir);
  const auto id = queue.add_subscriber("https://a.example/h", 5, 10);
  ASSERT_EQ(run_surge(dir, {"subscriber", "set", "--db", queue.path(), std::to_string(id),
                            "--batch", "7", "--coalesce", "/good"})
                .exit_code,
            0);
  struct bad_case {
    std::string flag, value, says;
  };
  const std::vector<bad_case> cases = {
      {"--batch", "0", "--batch"},
      {"--batch", "501", "--batch"},
      {"--batch", "x", "--batch"},
      {"--batch-bytes", "1048577", "--batch-bytes"},
      {"--batch-linger", "nan", "--batch-linger"},
      {"--batch-linger", "-1", "--batch-linger"},
      {"--batch-linger", "61", "--batch-linger"},
      {"--coalesce", "data/x", "must start with '/'"},
      {"--coalesce", "/a~2", "--coalesce"},
      {"--coalesce-window", "0", "--coalesce-window"},
      {"--coalesce-window", "nan", "--coalesce-window"},
      {"--coalesce-window", "3601", "--coalesce-window"},
      {"--coalesce-events", "video*", "--coalesce-events"},
      {"--coalesce-events", "a b", "--coalesce-events"},
  };
  for (const auto& c : cases) {
    for (const bool add : {true, false}) {
      const auto args =
          add ? std::vector<std::string>{"subscriber", "add",   "--db",
                                         queue.path(), "--url", "https://b.example/h",
                                         c.flag,       c.value}
              : std::vector<std::string>{"subscriber",       "set",  "--db", queue.path(),
                                         std::to_string(id), c.flag, c.value};
      const auto result = run_surge(dir, args);
      EXPECT_EQ(result.exit_code, 2)
          << args[1] << " " << c.flag << " " << c.value << ": " << result.out << result.err;
      EXPECT_NE(result.err.find(c.says), std::string::npos)
          << c.flag << " " << c.value << ": " << result.err;
    }
  }
  // Nothing was added, and the existing subscriber kept its values.
  const auto list = run_surge(dir, {"subscriber", "list", "--db", queue.path(), "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(boost::json::parse(list.out).as_array().size(), 1u);
  const auto row = listed(dir, queue.path(), id);
  EXPECT_EQ(row.at("batch_max").as_int64(), 7);
  EXPECT_EQ(row.at("coalesce_key").as_string(), "/good");
  EXPECT_DOUBLE_EQ(row.at("batch_linger").to_number<double>(), 0.5);
}

TEST(ReliefCli, StatsShowCoalescedRowsAndTheSubscribersThatUseEither) {
  temp_dir dir;
  test_queue queue(dir);
  const auto plain = queue.add_subscriber("https://a.example/h", 5, 10);
  const auto batched = queue.add_subscriber("https://b.example/h", 5, 10);
  const auto coalescing = queue.add_subscriber("https://c.example/h", 5, 10);
  ASSERT_EQ(run_surge(dir, {"subscriber", "set", "--db", queue.path(), std::to_string(batched),
                            "--batch", "50", "--batch-bytes", "4096"})
                .exit_code,
            0);
  ASSERT_EQ(run_surge(dir, {"subscriber", "set", "--db", queue.path(), std::to_string(coalescing),
                            "--coalesce", "/video", "--coalesce-window", "5"})
                .exit_code,
            0);
  const auto rows = queue.add_rows(coalescing, 4);
  queue.add_rows(plain, 2);
  // Rows 1 and 2 were coalesced into 3, which was delivered; row 4 is still pending.
  for (int i = 0; i < 2; ++i) {
    queue.db().exec("UPDATE webhook_delivery SET status = 'done', coalesced_into = " +
                    std::to_string(rows[2]) + " WHERE id = " + std::to_string(rows[i]));
  }
  queue.db().exec("UPDATE webhook_delivery SET status = 'done', delivered_at = 1 WHERE id = " +
                  std::to_string(rows[2]));

  auto result = run_surge(dir, {"stats", "--db", queue.path(), "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto stats = boost::json::parse(result.out).as_object();
  EXPECT_EQ(stats.at("coalesced").as_int64(), 2);
  EXPECT_EQ(stats.at("done").as_int64(), 3);
  for (const auto& entry : stats.at("subscribers").as_array()) {
    const auto sub = entry.at("subscriber_id").as_int64();
    EXPECT_EQ(entry.at("coalesced").as_int64(), sub == coalescing ? 2 : 0) << sub;
  }
  const auto& relief = stats.at("batching_and_coalescing").as_array();
  ASSERT_EQ(relief.size(), 2u) << result.out;  // the plain subscriber is not listed
  EXPECT_EQ(relief[0].at("subscriber_id").as_int64(), batched);
  EXPECT_EQ(relief[0].at("batch_max").as_int64(), 50);
  EXPECT_EQ(relief[0].at("batch_bytes").as_int64(), 4096);
  EXPECT_EQ(relief[0].at("coalesce_key").as_string(), "");
  EXPECT_EQ(relief[1].at("subscriber_id").as_int64(), coalescing);
  EXPECT_EQ(relief[1].at("batch_max").as_int64(), 1);
  EXPECT_EQ(relief[1].at("coalesce_key").as_string(), "/video");
  EXPECT_DOUBLE_EQ(relief[1].at("coalesce_window").to_number<double>(), 5);

  result = run_surge(dir, {"stats", "--db", queue.path()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("coalesced"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("/video (5 s, *)"), std::string::npos) << result.out;
}

TEST(ReliefCli, AuditCountsPostsAndRowsApart) {
  temp_dir dir;
  test_queue queue(dir);
  const auto sub = queue.add_subscriber("https://a.example/h", 1, 1);
  // A batch POST of 4 rows (lead 10) and a single row, as the drain records them: one record
  // per row, the batch's naming its first row and size.
  SQLite::Statement insert(queue.db(),
                           "INSERT INTO surge_attempt(delivery_id, subscriber_id, attempt, "
                           "started_at, finished_at, status_code, batch_lead, batch_size) "
                           "VALUES (?, ?, 1, ?, ?, 200, ?, ?)");
  auto add = [&](std::int64_t id, double start, std::optional<std::int64_t> lead, int size) {
    insert.reset();
    insert.bind(1, id);
    insert.bind(2, sub);
    insert.bind(3, start);
    insert.bind(4, start + 0.1);
    if (lead) {
      insert.bind(5, *lead);
    } else {
      insert.bind(5);
    }
    insert.bind(6, size);
    insert.exec();
  };
  for (std::int64_t id = 10; id < 14; ++id) add(id, 1'795'000'000, 10, 4);
  add(20, 1'795'000'000.5, std::nullopt, 1);
  // Two requests within a second are within burst 1 + 1/s + 1; five would not be.
  const auto result = run_surge(dir, {"audit", "--db", queue.path(), "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const auto list = boost::json::parse(result.out).as_array();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].at("attempts").as_int64(), 2);
  EXPECT_EQ(list[0].at("rows").as_int64(), 5);
  EXPECT_EQ(list[0].at("max_1s").as_int64(), 2);
  EXPECT_FALSE(list[0].at("violation").as_bool());
}

}  // namespace
}  // namespace surge::testing
