// The backlog sweep on a real queue file, on its own thread: a spike whose repeats of a key lie
// hundreds of rows apart, further than any claim looks ahead, is merged to the newest row of
// each key, and the sweep's judgement is published for the claims to wait on. The merging rule
// is proto's (plan_coalescing), the marks storage's (CoalescingBacklogOn.*), and the claims'
// wait for the judgement sweep_judgement's.
#include "engine/storage_thread/coalesce_sweeper.hpp"

#include <gtest/gtest.h>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "proto/clock.hpp"
#include "storage/queue.hpp"
#include "storage/schema.hpp"
#include "storage/subscribers.hpp"
#include "tests/support/temp_dir.hpp"

namespace surge::engine {
namespace {

using namespace std::chrono_literals;

TEST(CoalesceSweeper, RepeatsFarApartInTheBacklogAreMergedToTheNewestOfEachKey) {
  surge::testing::temp_dir dir;
  const auto path = dir.file("queue.db");
  storage::connection db({.location = path});
  storage::migrate(db, true);
  storage::subscriber_row subscriber;
  subscriber.url = "https://partner.example/hook";
  subscriber.secret = "secret";
  subscriber.coalesce_key = "/data/video_id";
  subscriber.coalesce_window = 60;
  const auto id = storage::add_subscriber(db, subscriber);
  // 200 videos, five rank updates each, interleaved: a video's repeats lie 200 rows apart.
  constexpr int videos = 200;
  const double now = proto::unix_now();
  for (int update = 0; update < 5; ++update) {
    for (int video = 0; video < videos; ++video) {
      storage::emit_event(db, "video.rank_updated",
                          R"({"data":{"video_id":)" + std::to_string(video) + R"(,"rank":)" +
                              std::to_string(update) + "}}",
                          now - 5 + update);
    }
  }

  drain_counters counters;
  sweep_judgement judgement;
  coalesce_sweeper sweeper({.db_path = path, .interval = 20ms}, counters, judgement);
  const auto judged_through = [&] {
    storage::subscriber_demand demand{.subscriber_id = id, .judged_through = 0};
    judgement.bound(std::span(&demand, 1), std::chrono::steady_clock::now());
    return demand.judged_through.value_or(-1);
  };
  for (int waited = 0; judged_through() <= 0 && waited < 3000; ++waited) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_GT(judged_through(), 0) << "no sweep was judged within 30 s";

  // Each video's rows in queue order, with what became of them.
  SQLite::Database file(path);
  SQLite::Statement rows(file,
                         "SELECT id, status, coalesced_into, json_extract(payload, "
                         "'$.data.video_id') FROM webhook_delivery ORDER BY id");
  std::map<int, std::vector<std::int64_t>> ids;
  std::map<std::int64_t, std::pair<std::string, std::int64_t>> fate;
  while (rows.executeStep()) {
    const auto row = rows.getColumn(0).getInt64();
    ids[rows.getColumn(3).getInt()].push_back(row);
    fate[row] = {rows.getColumn(1).getString(), rows.getColumn(2).getInt64()};
  }
  ASSERT_EQ(ids.size(), static_cast<std::size_t>(videos));
  for (const auto& [video, of_video] : ids) {
    ASSERT_EQ(of_video.size(), 5u);
    EXPECT_EQ(fate[of_video.back()], std::make_pair(std::string("pending"), std::int64_t{0}))
        << "video " << video << "'s newest";
    for (std::size_t i = 0; i + 1 < of_video.size(); ++i) {
      // Done without a request, naming the row sent in its place.
      EXPECT_EQ(fate[of_video[i]].first, "done") << "video " << video;
      EXPECT_EQ(fate[of_video[i]].second, of_video.back()) << "video " << video;
    }
  }
  EXPECT_EQ(counters.coalesced.load(), 4 * videos);
}

}  // namespace
}  // namespace surge::engine
