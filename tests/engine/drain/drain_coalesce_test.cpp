// Coalescing end to end: the real `surge drain` and `surge sink` on loopback, the rule
// set with the real `surge subscriber` command, on a real queue file.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <thread>

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

TEST(DrainCoalesce, RepeatsFurtherApartThanTheWindowAreNotMerged) {
  coalesce_env env;
  const auto id = env.subscriber({"--coalesce", "/data/video_id", "--coalesce-window", "10"});
  std::vector<std::int64_t> rows;  // one video, one update a second for 25 s
  for (int i = 0; i < 25; ++i) {
    rows.push_back(env.row(id, "video.rank_updated", rank(7, i), env.now - 30 + i));
  }
  const auto result = env.drain({"--until-drained"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto per_row = deliveries(env.sink.stop_and_read());
  // Newest first: 24 keeps 14..23, 13 keeps 3..12, 2 keeps 0..1.
  EXPECT_EQ(per_row.size(), 3u);
  for (const int kept : {24, 13, 2}) EXPECT_EQ(per_row.count(rows[kept]), 1u) << kept;
  EXPECT_EQ(env.coalesced_into(rows[14]).value_or(0), rows[24]);
  EXPECT_EQ(env.coalesced_into(rows[12]).value_or(0), rows[13]);
  EXPECT_EQ(env.coalesced_into(rows[0]).value_or(0), rows[2]);
  EXPECT_EQ(env.queue.count_by_status()["done"], 25);
}

TEST(DrainCoalesce, CoalescedRowsGoOutInBatchesAndTurningItOffSendsEveryRow) {
  coalesce_env env;
  const auto id = env.subscriber({"--coalesce", "/data/video_id", "--batch", "50"});
  for (int update = 0; update < 4; ++update) {
    for (int video = 0; video < 20; ++video) {
      env.row(id, "video.rank_updated", rank(video, update), env.now - 4 + update);
    }
  }
  auto result = env.drain({"--until-drained"});
  ASSERT_EQ(result.exit_code, 0) << result.err;

  // Off again: the next spike's rows all go.
  const auto off = run_surge(env.dir, {"subscriber", "set", "--db", env.queue.path(),
                                       std::to_string(id), "--coalesce", ""});
  ASSERT_EQ(off.exit_code, 0) << off.err;
  std::set<std::int64_t> second;
  for (int update = 0; update < 3; ++update) {
    second.insert(env.row(id, "video.rank_updated", rank(0, update), proto::unix_now()));
  }
  result = env.drain({"--until-drained"});
  ASSERT_EQ(result.exit_code, 0) << result.err;

  const auto requests = env.sink.stop_and_read();
  const auto per_row = deliveries(requests);
  EXPECT_EQ(per_row.size(), 20u + second.size());
  for (const auto row : second) EXPECT_EQ(per_row.count(row), 1u) << row;
  int batched_rows = 0;
  for (const auto& request : requests) batched_rows += request.batch_size;
  EXPECT_EQ(batched_rows, 20 + 3);  // batching stayed on
  EXPECT_LE(requests.size(), 3u);
}

TEST(DrainCoalesce, RepeatsFarApartInTheBacklogAreMergedToo) {
  // A spike: 600 videos, five rank updates each, interleaved, so a video's repeats lie 600 rows
  // apart, further than any claim looks ahead. The backlog sweep merges them anyway.
  coalesce_env env;
  const auto id = env.subscriber({"--coalesce", "/data/video_id"}, 400, 20);
  std::map<int, std::vector<std::int64_t>> by_video;
  for (int update = 0; update < 5; ++update) {
    for (int video = 0; video < 600; ++video) {
      by_video[video].push_back(
          env.row(id, "video.rank_updated", rank(video, update), env.now - 5 + update));
    }
  }
  const auto result = env.drain({"--until-drained"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto per_row = deliveries(env.sink.stop_and_read());
  EXPECT_EQ(env.queue.count_by_status()["done"], 3000);
  for (const auto& [video, rows] : by_video) {
    // The newest of each video is always sent, once.
    EXPECT_EQ(per_row.count(rows.back()) ? per_row.at(rows.back()) : 0, 1) << "video " << video;
    for (const auto row : rows) {
      const auto into = env.coalesced_into(row);
      if (!into) continue;
      // Replaced only by a newer row of the same video.
      EXPECT_NE(std::find(rows.begin(), rows.end(), *into), rows.end()) << row;
      EXPECT_GT(*into, row);
      EXPECT_EQ(per_row.count(row), 0u) << "row " << row << " was coalesced and sent";
    }
  }
  // At 400/s the drain takes seconds; the first sweep comes within one: most repeats never go.
  EXPECT_LT(per_row.size(), 3000u / 2) << per_row.size() << " of 3000 rows were sent";
}

// A steady stream: every key updated each second while the subscriber's limit is below the
// stream's rate, so the backlog grows and merges chain (a row merged into one that is merged
// later). The promise holds along the chain: a row is replaced only by one created within a
// window of it, so each key is heard about at least once per window. Before, 29 of 50 keys got
// nothing while the stream ran, and hundreds of rows ended inside a row far newer than they.
TEST(DrainCoalesce, UnderASteadyStreamEveryKeyIsHeardWithinItsWindow) {
  coalesce_env env;
  constexpr int keys = 20;
  constexpr double window = 3;
  const auto id = env.subscriber({"--coalesce", "/data/video_id", "--coalesce-window", "3"},
                                 /*rate=*/10, /*burst=*/5);
  tools::child_process drain(surge_binary(),
                             {"drain", "--db", env.queue.path(), "--allow-private-targets",
                              "--progress-interval", "0", "--duration", "14"},
                             env.dir.file("drain.out"), env.dir.file("drain.err"));
  // The producer: every key once a second for 12 s, as another program writing the queue.
  sql_client producer(env.queue.path());
  const auto stream_began = proto::unix_now();
  for (int second = 0; second < 12; ++second) {
    const double at = proto::unix_now();
    producer.begin();
    for (int video = 0; video < keys; ++video) {
      producer.exec(
          "INSERT INTO webhook_delivery(subscriber_id, event_type, payload, created_at, "
          "next_attempt_at) VALUES (?, 'video.rank_updated', ?, ?, ?)",
          {std::to_string(id), rank(video, second), std::to_string(at), std::to_string(at)});
    }
    producer.commit();
    std::this_thread::sleep_until(std::chrono::steady_clock::now() +
                                  std::chrono::duration<double>(at + 1 - proto::unix_now()));
  }
  const auto stream_ended = proto::unix_now();
  ASSERT_TRUE(drain.wait(std::chrono::seconds(60)).has_value());
  const auto requests = env.sink.stop_and_read();

  // Where each coalesced row's event went: along coalesced_into to the row that was sent.
  std::map<std::int64_t, std::pair<double, std::optional<std::int64_t>>> rows;  // created, into
  SQLite::Statement all(env.queue.db(),
                        "SELECT id, created_at, coalesced_into FROM webhook_delivery");
  while (all.executeStep()) {
    rows[all.getColumn(0).getInt64()] = {
        all.getColumn(1).getDouble(),
        all.getColumn(2).isNull() ? std::nullopt : std::optional(all.getColumn(2).getInt64())};
  }
  int chained = 0;
  for (const auto& [row, entry] : rows) {
    if (!entry.second) continue;
    auto target = *entry.second;
    while (rows.at(target).second) {
      target = *rows.at(target).second;
      ++chained;
    }
    EXPECT_LE(rows.at(target).first - entry.first, window + 0.001)
        << "row " << row << " ended inside row " << target << ", which is newer than its window";
  }
  // Every key was heard about while the stream ran, and again after its first window.
  std::map<std::string, std::vector<double>> heard;
  for (const auto& request : requests) {
    if (request.status != 200 || request.arrival > stream_ended) continue;
    SQLite::Statement payload(env.queue.db(), "SELECT payload FROM webhook_delivery WHERE id = ?");
    payload.bind(1, request.delivery_id);
    ASSERT_TRUE(payload.executeStep());
    const std::string text = payload.getColumn(0).getString();
    const auto at = text.find("\"video_id\":\"");
    heard[text.substr(at + 12, text.find('"', at + 12) - at - 12)].push_back(request.arrival);
  }
  EXPECT_EQ(heard.size(), static_cast<std::size_t>(keys)) << "keys heard during the stream";
  for (const auto& [key, arrivals] : heard) {
    EXPECT_GE(arrivals.size(), 2u) << key << " was heard only once in a 12 s stream";
    EXPECT_LE(arrivals.front() - stream_began, 2 * window + 2) << key << " waited too long";
  }
  (void)chained;
}

}  // namespace
}  // namespace surge::testing
