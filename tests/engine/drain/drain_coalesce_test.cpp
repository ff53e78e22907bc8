// Coalescing through the real binary: the rule set with `surge subscriber`, and what the queue
// file and `surge stats` say afterwards. The backlog sweep is tested on its own thread
// (tests/engine/storage_thread/coalesce_sweeper_test.cpp), which rows merge into which (windows,
// chains) in tests/proto/coalesce_test.cpp, and the claim-time rule on the shard core's
// simulated clock (tests/engine/shard/core_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include <SQLiteCpp/Statement.h>

#include "proto/clock.hpp"
#include "storage/sqlite/database.hpp"
#include "tests/support/e2e.hpp"

namespace surge::testing {
namespace {

struct coalesce_env {
  temp_dir dir;
  test_queue queue{dir};
  sink_process sink{dir, queue.path()};
  double now = proto::unix_now();

  std::int64_t subscriber(const std::vector<std::string>& settings, double rate = 1000,
                          int burst = 100) {
    const auto id = queue.add_subscriber_at(sink, rate, burst);
    std::vector<std::string> args{"subscriber", "set", "--db", queue.path(), std::to_string(id)};
    args.insert(args.end(), settings.begin(), settings.end());
    const auto set = run_surge(dir, args);
    EXPECT_EQ(set.exit_code, 0) << set.err;
    return id;
  }

  std::int64_t row(std::int64_t subscriber_id, const std::string& type, const std::string& payload,
                   double created_at, double next_attempt_at = 0, double locked_until = 0) {
    SQLite::Statement insert(
        queue.db(),
        "INSERT INTO webhook_delivery(subscriber_id, event_type, payload, "
        "created_at, next_attempt_at, locked_until) VALUES (?, ?, ?, ?, ?, ?)");
    insert.bind(1, subscriber_id);
    insert.bind(2, type);
    insert.bind(3, payload);
    insert.bind(4, created_at);
    insert.bind(5, next_attempt_at);
    insert.bind(6, locked_until);
    insert.exec();
    return queue.db().getLastInsertRowid();
  }

  run_result drain(std::vector<std::string> extra = {}) {
    std::vector<std::string> args{
        "drain", "--db", queue.path(), "--allow-private-targets", "--progress-interval", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_surge(dir, args);
  }

  std::optional<std::int64_t> coalesced_into(std::int64_t id) {
    SQLite::Statement query(queue.db(), "SELECT coalesced_into FROM webhook_delivery WHERE id = ?");
    query.bind(1, id);
    query.executeStep();
    if (query.getColumn(0).isNull()) return std::nullopt;
    return query.getColumn(0).getInt64();
  }
};

std::string rank(int video, int rank) {
  return R"({"type":"video.rank_updated","data":{"video_id":"v)" + std::to_string(video) +
         R"(","rank":)" + std::to_string(rank) + "}}";
}

TEST(DrainCoalesce, OnlyTheNewestRowOfEachKeyIsSentAndTheRestNameIt) {
  coalesce_env env;
  const auto id = env.subscriber({"--coalesce", "/data/video_id", "--coalesce-window", "10",
                                  "--coalesce-events", "video.rank_updated"});
  std::map<int, std::vector<std::int64_t>> by_video;  // oldest first
  for (int update = 0; update < 5; ++update) {
    for (int video = 0; video < 10; ++video) {
      by_video[video].push_back(
          env.row(id, "video.rank_updated", rank(video, update), env.now - 5 + update * 0.5));
    }
  }
  // Sent as usual: rows without the key, and rows of a type outside the rule with the same key.
  std::set<std::int64_t> always_sent;
  for (int i = 0; i < 5; ++i) {
    always_sent.insert(env.row(id, "video.rank_updated", R"({"data":{"other":1}})", env.now));
    always_sent.insert(env.row(id, "video.deleted", rank(i, 0), env.now));
  }
  // Never touched: a row not due yet, and one leased by another drainer.
  const auto not_due = env.row(id, "video.rank_updated", rank(0, 99), env.now, env.now + 3600);
  const auto leased = env.row(id, "video.rank_updated", rank(1, 99), env.now, 0, env.now + 3600);

  const auto result = env.drain({"--duration", "3"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("coalesced=40"), std::string::npos) << result.out;
  const auto per_row = deliveries(env.sink.stop_and_read());

  for (const auto& [video, rows] : by_video) {
    const auto newest = rows.back();
    EXPECT_EQ(per_row.count(newest) ? per_row.at(newest) : 0, 1) << "video " << video;
    EXPECT_EQ(env.queue.row(newest).status, "done");
    EXPECT_FALSE(env.coalesced_into(newest));
    for (std::size_t i = 0; i + 1 < rows.size(); ++i) {
      EXPECT_EQ(per_row.count(rows[i]), 0u) << "row " << rows[i] << " was sent";
      const auto state = env.queue.row(rows[i]);
      EXPECT_EQ(state.status, "done");
      EXPECT_EQ(state.last_error, "coalesced into delivery " + std::to_string(newest));
      EXPECT_EQ(env.coalesced_into(rows[i]).value_or(0), newest);
    }
  }
  for (const auto row : always_sent) {
    EXPECT_EQ(per_row.count(row) ? per_row.at(row) : 0, 1) << "row " << row;
  }
  EXPECT_EQ(per_row.size(), 10u + always_sent.size());
  EXPECT_EQ(env.queue.row(not_due).status, "pending");
  EXPECT_EQ(env.queue.row(leased).status, "pending");
  EXPECT_GT(env.queue.row(leased).locked_until, env.now + 3000);

  const auto stats = run_surge(env.dir, {"stats", "--db", env.queue.path(), "--json"});
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_NE(stats.out.find(R"("coalesced":40)"), std::string::npos) << stats.out;
}

}  // namespace
}  // namespace surge::testing
