// The sink over real loopback sockets: verdicts, behaviours, keep-alive, record and stats. Its
// hostile answers (resets, hangs, trickles, streamed bodies) are sink_answers_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "sink_server_fixture.hpp"
#include "sink_test_support.hpp"
#include "tools/sink/sink_server.hpp"

namespace surge::sink {
namespace {

using namespace testing;
using namespace std::chrono_literals;

class SinkServer : public sink_server_fixture {};

TEST_F(SinkServer, ValidVvvSignatureIsOk) {
  start();
  const auto result = post({.subscriber_id = vvv_id});
  ASSERT_TRUE(result.response) << result.error.message();
  EXPECT_EQ(result.response->result_int(), 200u);
  EXPECT_EQ(result.response->body(), R"({"ok":true})");
  EXPECT_EQ(only_verdict(), "ok");
}

TEST_F(SinkServer, ValidStandardSignatureIsOk) {
  start();
  const auto result = post({.subscriber_id = standard_id});
  ASSERT_TRUE(result.response) << result.error.message();
  EXPECT_EQ(only_verdict(), "ok");
}

TEST_F(SinkServer, StandardKnownAnswerIsOk) {
  start();
  auto request =
      unsigned_request({.subscriber_id = standard_id, .body = R"({"test": 2432232314})"});
  request.set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek");
  request.set("webhook-timestamp", "1614265330");
  request.set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
  ASSERT_TRUE(send_once(port(), request).response);
  // An old timestamp is a protocol slip worth counting, not a signature failure.
  EXPECT_EQ(stats().at("problems").at("stale_timestamp").to_number<int>(), 1);
  EXPECT_EQ(only_verdict(), "ok");
}

TEST_F(SinkServer, TamperedBodyIsBad) {
  start();
  auto request = signed_request({.subscriber_id = vvv_id}, subscriber(vvv_id));
  request.body() = R"({"video":43})";
  request.prepare_payload();
  ASSERT_TRUE(send_once(port(), request).response);
  EXPECT_EQ(only_verdict(), "bad");
}

TEST_F(SinkServer, TamperedStandardBodyIsBad) {
  start();
  auto request = signed_request({.subscriber_id = standard_id}, subscriber(standard_id));
  request.body() = R"({"video":43})";
  request.prepare_payload();
  ASSERT_TRUE(send_once(port(), request).response);
  EXPECT_EQ(only_verdict(), "bad");
}

TEST_F(SinkServer, NoSignatureHeadersAreMissing) {
  start();
  ASSERT_TRUE(send_once(port(), unsigned_request({.subscriber_id = vvv_id})).response);
  EXPECT_EQ(only_verdict(), "missing");
}

TEST_F(SinkServer, UnknownSubscriberIsReported) {
  start();
  ASSERT_TRUE(post({.subscriber_id = 999}).response);
  const auto rows = stop_and_read_record();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][column_subscriber], "999");
  EXPECT_EQ(rows[0][column_verdict], "unknown_subscriber");
}

TEST_F(SinkServer, SubscriberAddedAfterStartIsRecognised) {
  start();
  add_subscriber(queue_, make_subscriber(50));
  ASSERT_TRUE(post({.subscriber_id = 50}).response);
  EXPECT_EQ(only_verdict(), "ok");
}

TEST_F(SinkServer, BehaviourStatusAndRetryAfterComeBack) {
  start(R"({"3": {"status": 429, "retry_after": "2"},
            "9": {"status": 503, "retry_after": "Wed, 21 Oct 2015 07:28:00 GMT"},
            "5": {"status": 410}})");
  const auto limited = post({.subscriber_id = 3});
  ASSERT_TRUE(limited.response) << limited.error.message();
  EXPECT_EQ(limited.response->result_int(), 429u);
  EXPECT_EQ((*limited.response)[http::field::retry_after], "2");

  const auto unavailable = post({.subscriber_id = 9});
  ASSERT_TRUE(unavailable.response);
  EXPECT_EQ(unavailable.response->result_int(), 503u);
  EXPECT_EQ((*unavailable.response)[http::field::retry_after], "Wed, 21 Oct 2015 07:28:00 GMT");

  const auto gone = post({.subscriber_id = 5});
  ASSERT_TRUE(gone.response);
  EXPECT_EQ(gone.response->result_int(), 410u);
  EXPECT_EQ(gone.response->count(http::field::retry_after), 0u);

  const auto rows = stop_and_read_record();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0][column_status], "429");
  EXPECT_EQ(rows[1][column_status], "503");
  EXPECT_EQ(rows[2][column_status], "410");
}

TEST_F(SinkServer, DefaultBehaviourApplies) {
  start(R"({"*": {"status": 500}, "1": {"status": 202}})");
  EXPECT_EQ(post({.subscriber_id = 1}).response->result_int(), 202u);
  EXPECT_EQ(post({.subscriber_id = 4}).response->result_int(), 500u);
}

TEST_F(SinkServer, DelayIsHonoured) {
  start(R"({"4": {"delay_ms": 200}, "5": {"delay_ms": 60000}})");
  const auto result = post({.subscriber_id = 4});
  ASSERT_TRUE(result.response) << result.error.message();
  EXPECT_EQ(result.response->result_int(), 200u);
  // Held: a minute's delay is not over before the client's own 300 ms timeout.
  const auto held = post({.subscriber_id = 5}, 300ms);
  EXPECT_FALSE(held.response);
  EXPECT_EQ(held.error, boost::beast::error::timeout) << held.error.message();
}

TEST_F(SinkServer, DelayPerRequestHoldsTheAnswer) {
  // How the wait grows with the requests in progress is reply::wait_while_answering's rule
  // (behaviour_test.cpp); here, that the server holds an answer by it: a minute per request in
  // progress is not over before the client's own 300 ms timeout, and a short one is answered.
  start(R"({"4": {"delay_per_request_ms": 60000}, "5": {"delay_per_request_ms": 20}})");
  const auto held = post({.subscriber_id = 4}, 300ms);
  EXPECT_FALSE(held.response);
  EXPECT_EQ(held.error, boost::beast::error::timeout) << held.error.message();
  // One element each, not std::vector<bool>, whose bits share a word between the threads.
  std::vector<char> answered(3, 0);
  std::vector<std::thread> clients;
  for (std::size_t i = 0; i < answered.size(); ++i) {
    clients.emplace_back([&, i] { answered[i] = post({.subscriber_id = 5}).response ? 1 : 0; });
  }
  for (auto& client : clients) client.join();
  EXPECT_EQ(answered, std::vector<char>(3, 1));
}

TEST_F(SinkServer, FailFirstFailsThenSucceedsPerDelivery) {
  start(R"({"6": {"fail_first": 2, "status": 500}})");
  std::vector<unsigned> statuses;
  for (int attempt = 1; attempt <= 3; ++attempt)
    statuses.push_back(
        post({.subscriber_id = 6, .delivery_id = "70", .attempt = attempt}).response->result_int());
  statuses.push_back(post({.subscriber_id = 6, .delivery_id = "71"}).response->result_int());
  EXPECT_EQ(statuses, (std::vector<unsigned>{500, 500, 200, 500}));

  const auto rows = stop_and_read_record();
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[2][column_delivery], "70");
  EXPECT_EQ(rows[2][column_attempt], "3");
  EXPECT_EQ(rows[3][column_delivery], "71");
}

TEST_F(SinkServer, KeepAliveRequestsShareAConnectionId) {
  start();
  test_client client(port());
  ASSERT_FALSE(client.connect());
  for (int i = 0; i < 2; ++i) {
    const auto result = client.send(signed_request({.subscriber_id = 1}, subscriber(1)));
    ASSERT_TRUE(result.response) << result.error.message();
    EXPECT_TRUE(result.response->keep_alive());
  }
  ASSERT_TRUE(post({.subscriber_id = 1}).response);

  EXPECT_EQ(stats().at("connections").to_number<int>(), 3);  // the stats request is the third
  const auto rows = stop_and_read_record();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0][column_connection], rows[1][column_connection]);
  EXPECT_NE(rows[0][column_connection], rows[2][column_connection]);
}

TEST_F(SinkServer, ConnectionCloseIsHonoured) {
  start();
  test_client client(port());
  ASSERT_FALSE(client.connect());
  auto request = signed_request({.subscriber_id = 1}, subscriber(1));
  request.keep_alive(false);
  const auto first = client.send(request);
  ASSERT_TRUE(first.response);
  EXPECT_FALSE(first.response->keep_alive());
  EXPECT_FALSE(client.send(signed_request({.subscriber_id = 1}, subscriber(1))).response);
}

TEST_F(SinkServer, ExpectContinueGetsAnInterimResponse) {
  start();
  test_client client(port());
  ASSERT_FALSE(client.connect());
  auto request = signed_request({.subscriber_id = 1}, subscriber(1));
  request.set(http::field::expect, "100-continue");
  const auto interim = client.send(request);
  ASSERT_TRUE(interim.response) << interim.error.message();
  EXPECT_EQ(interim.response->result_int(), 100u);
  const auto final = client.receive();
  ASSERT_TRUE(final.response) << final.error.message();
  EXPECT_EQ(final.response->result_int(), 200u);
  EXPECT_EQ(only_verdict(), "ok");
}

TEST_F(SinkServer, OversizedBodyIs413) {
  start();
  const auto result = post({.subscriber_id = 1, .body = std::string(1024 * 1024 + 1, 'x')});
  ASSERT_TRUE(result.response) << result.error.message();
  EXPECT_EQ(result.response->result_int(), 413u);
  const auto rows = stop_and_read_record();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][column_verdict], "too_large");
  EXPECT_EQ(rows[0][column_status], "413");
}

TEST_F(SinkServer, BodyAtTheLimitIsAccepted) {
  start();
  const auto result = post({.subscriber_id = 1, .body = std::string(1024 * 1024, 'x')});
  ASSERT_TRUE(result.response) << result.error.message();
  EXPECT_EQ(result.response->result_int(), 200u);
  EXPECT_EQ(only_verdict(), "ok");
}

TEST_F(SinkServer, StatsCountRequestsByVerdictAndSubscriber) {
  start(R"({"3": {"status": 500}})");
  post({.subscriber_id = 1});
  post({.subscriber_id = 3});
  post({.subscriber_id = 3});
  send_once(port(), unsigned_request({.subscriber_id = 3}));
  const auto s = stats();
  EXPECT_EQ(s.at("requests").to_number<int>(), 4);
  EXPECT_EQ(s.at("by_verdict").at("ok").to_number<int>(), 3);
  EXPECT_EQ(s.at("by_verdict").at("missing").to_number<int>(), 1);
  const auto& three = s.at("by_subscriber").at("3");
  EXPECT_EQ(three.at("requests").to_number<int>(), 3);
  EXPECT_EQ(three.at("ok").to_number<int>(), 2);
  EXPECT_EQ(three.at("by_status").at("500").to_number<int>(), 3);
  EXPECT_EQ(s.at("by_subscriber").at("1").at("ok").to_number<int>(), 1);
}

TEST_F(SinkServer, ProtocolSlipsAreCounted) {
  start();
  auto request = signed_request({.subscriber_id = 1}, subscriber(1));
  request.set(http::field::content_type, "text/plain");
  request.erase("X-VVV-Attempt");
  ASSERT_TRUE(send_once(port(), request).response);
  const auto problems = stats().at("problems");
  EXPECT_EQ(problems.at("bad_content_type").to_number<int>(), 1);
  EXPECT_EQ(problems.at("missing_delivery_headers").to_number<int>(), 1);
  EXPECT_EQ(only_verdict(), "ok");
}

TEST_F(SinkServer, RecordHasOneLinePerRequestAfterStop) {
  start(R"({"7": {"hang": true}, "8": {"reset": true}, "3": {"status": 503}})");
  post({.subscriber_id = 1, .delivery_id = "1", .event_type = "video.rank_updated"});
  post({.subscriber_id = 2, .delivery_id = "2"});
  post({.subscriber_id = 3, .delivery_id = "3", .attempt = 4});
  post({.subscriber_id = 8, .delivery_id = "8"});
  post({.subscriber_id = 7, .delivery_id = "7"}, 100ms);
  send_once(port(), unsigned_request({.subscriber_id = 1, .delivery_id = "9"}));

  const auto rows = stop_and_read_record();
  ASSERT_EQ(rows.size(), 6u);
  for (const auto& row : rows) {
    ASSERT_EQ(row.size(), 11u);  // batch_size last (0: not a batch)
    const auto& arrival = row[0];
    ASSERT_NE(arrival.find('.'), std::string::npos);
    EXPECT_EQ(arrival.size() - arrival.find('.') - 1, 6u) << arrival;
    EXPECT_GT(std::stod(arrival), 1.6e9);
  }
  // Plain HTTP: no server name; the body {"video":42} by its SHA-256.
  EXPECT_EQ(rows[0], (std::vector<std::string>{
                         rows[0][0], "1", "1", "1", "ok", "200", "video.rank_updated",
                         rows[0][column_connection], "",
                         "92876e6ba3492d494f7c596977da2841e5dcd33e8ba629b97bcc6c1f901a6f0b", "0"}));
  EXPECT_EQ(rows[2][column_attempt], "4");
  EXPECT_EQ(rows[2][column_status], "503");
  EXPECT_EQ(rows[3][column_status], "0");
  EXPECT_EQ(rows[4][column_delivery], "7");
  EXPECT_EQ(rows[4][column_status], "0");
  EXPECT_EQ(rows[5][column_verdict], "missing");
  EXPECT_EQ(rows[5][column_event], "video.trending");
}

TEST_F(SinkServer, SeveralThreadsServeConcurrentClients) {
  start(R"({"4": {"delay_ms": 20}})", 2);
  std::atomic<int> answered{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      test_client client(port());
      if (client.connect()) return;
      for (int i = 0; i < 5; ++i) {
        const auto d =
            delivery{.subscriber_id = 3 + c % 2, .delivery_id = std::to_string(c * 100 + i)};
        if (client.send(signed_request(d, subscriber(d.subscriber_id))).response) ++answered;
      }
    });
  }
  for (auto& client : clients) client.join();
  EXPECT_EQ(answered.load(), 20);
  const auto rows = stop_and_read_record();
  EXPECT_EQ(rows.size(), 20u);
  for (const auto& row : rows) EXPECT_EQ(row[column_verdict], "ok");
}

TEST_F(SinkServer, LocationIsSentWithTheStatus) {
  start(R"({"4": {"status": 302, "location": "http://127.0.0.1:9/elsewhere"}})");
  const auto result = post({.subscriber_id = 4});
  ASSERT_TRUE(result.response) << result.error.message();
  EXPECT_EQ(result.response->result_int(), 302u);
  EXPECT_EQ((*result.response)[http::field::location], "http://127.0.0.1:9/elsewhere");
}

TEST_F(SinkServer, BodyIsRecordedByItsHashByteForByte) {
  start();
  const std::string not_utf8("\xC3\x28", 2);
  post({.subscriber_id = 1, .delivery_id = "1", .body = ""});
  post({.subscriber_id = 1, .delivery_id = "2", .body = not_utf8});
  const auto rows = stop_and_read_record();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][column_verdict], "ok");
  EXPECT_EQ(rows[0][column_body_sha256],
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(rows[1][column_verdict], "ok");
  EXPECT_EQ(rows[1][column_body_sha256], sha256_hex(not_utf8));
  EXPECT_EQ(rows[1][column_sni], "") << "plain HTTP has no server name";
}

TEST_F(SinkServer, StopIsIdempotentAndServerCanBeDestroyedUnstarted) {
  start();
  server_->stop();
  server_->stop();
  sink_config config;
  config.db_path = queue_;
  sink_server unstarted(std::move(config));
  EXPECT_NE(unstarted.port(), 0);
}

TEST_F(SinkServer, MissingQueueFileThrows) {
  sink_config config;
  config.db_path = dir_.file("absent.db");
  EXPECT_ANY_THROW(sink_server{std::move(config)});
}

}  // namespace
}  // namespace surge::sink
