#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include "sink_test_support.hpp"
#include "tools/sink/recorder.hpp"

namespace surge::sink {
namespace {

using testing::read_lines;
using testing::temp_dir;

request_record sample(std::string subscriber, verdict result, unsigned status) {
  request_record r;
  r.arrival = 1700000000.25;
  r.subscriber = std::move(subscriber);
  r.delivery_id = "77";
  r.attempt = "2";
  r.result = result;
  r.status_sent = status;
  r.event_type = "video.trending";
  r.connection_id = 5;
  return r;
}

TEST(FormatRecord, HasTheDocumentedColumns) {
  EXPECT_EQ(format_record(sample("3", verdict::ok, 200)),
            "1700000000.250000,3,77,2,ok,200,video.trending,5,,,0");
  auto over_tls = sample("3", verdict::ok, 200);
  over_tls.sni = "localhost";
  over_tls.body_sha256 = "92876e6ba3492d494f7c596977da2841e5dcd33e8ba629b97bcc6c1f901a6f0b";
  EXPECT_EQ(format_record(over_tls),
            "1700000000.250000,3,77,2,ok,200,video.trending,5,localhost,"
            "92876e6ba3492d494f7c596977da2841e5dcd33e8ba629b97bcc6c1f901a6f0b,0");
  auto batch = sample("3", verdict::ok, 200);
  batch.delivery_id = "77 78 80";
  batch.batch_size = 3;
  EXPECT_EQ(format_record(batch), "1700000000.250000,3,77 78 80,2,ok,200,video.trending,5,,,3");
}

TEST(FormatRecord, QuotesFieldsThatNeedIt) {
  auto r = sample("3", verdict::bad, 500);
  r.event_type = "a,\"b\"";
  EXPECT_EQ(format_record(r), "1700000000.250000,3,77,2,bad,500,\"a,\"\"b\"\"\",5,,,0");
}

TEST(Recorder, WritesEveryLineByClose) {
  temp_dir dir;
  const auto path = dir.file("record.csv");
  recorder records(path, std::chrono::hours(1));
  for (int i = 0; i < 5; ++i) records.add(sample("3", verdict::ok, 200));
  records.close();
  EXPECT_EQ(read_lines(path).size(), 5u);
}

TEST(Recorder, FlushesPeriodicallyWhileRunning) {
  temp_dir dir;
  const auto path = dir.file("record.csv");
  recorder records(path, std::chrono::milliseconds(20));
  records.add(sample("3", verdict::ok, 200));
  // No upper bound is asserted on when it lands; only that it does without close().
  for (int i = 0; i < 500 && read_lines(path).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(read_lines(path).size(), 1u);
}

TEST(Recorder, StatsCountByVerdictStatusAndSubscriber) {
  recorder records("");
  records.add(sample("3", verdict::ok, 200));
  records.add(sample("3", verdict::bad, 500));
  records.add(sample("4", verdict::missing, 200));
  records.note_connection();
  const auto stats = boost::json::parse(records.stats_json()).as_object();
  EXPECT_EQ(stats.at("requests").to_number<std::uint64_t>(), 3u);
  EXPECT_EQ(stats.at("connections").to_number<std::uint64_t>(), 1u);
  EXPECT_EQ(stats.at("by_verdict").at("ok").to_number<std::uint64_t>(), 1u);
  EXPECT_EQ(stats.at("by_verdict").at("unknown_subscriber").to_number<std::uint64_t>(), 0u);
  EXPECT_EQ(stats.at("by_status").at("200").to_number<std::uint64_t>(), 2u);
  const auto& three = stats.at("by_subscriber").at("3");
  EXPECT_EQ(three.at("requests").to_number<std::uint64_t>(), 2u);
  EXPECT_EQ(three.at("ok").to_number<std::uint64_t>(), 1u);
  EXPECT_EQ(three.at("bad").to_number<std::uint64_t>(), 1u);
}

}  // namespace
}  // namespace surge::sink
