// The sink's hostile answers over real loopback sockets (tools/sink/connection.hpp): resets,
// hangs, a response a byte at a time, bodies streamed, announced and never sent, or endless.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>

#include "sink_server_fixture.hpp"
#include "sink_test_support.hpp"
#include "tools/sink/sink_server.hpp"

namespace surge::sink {
namespace {

using namespace testing;
using namespace std::chrono_literals;

class SinkAnswers : public sink_server_fixture {};

TEST_F(SinkAnswers, ResetClosesWithoutResponse) {
  start(R"({"8": {"reset": true}})");
  const auto result = post({.subscriber_id = 8});
  EXPECT_FALSE(result.response);
  EXPECT_EQ(result.error, boost::asio::error::connection_reset) << result.error.message();
  const auto rows = stop_and_read_record();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][column_status], "0");
  EXPECT_EQ(rows[0][column_verdict], "ok");
}

TEST_F(SinkAnswers, HangNeverAnswersAndDoesNotBlockOthers) {
  start(R"({"7": {"hang": true}})");  // one io thread: a blocking hang would stall everything
  test_client hanging(port());
  ASSERT_FALSE(hanging.connect());
  // Unanswered until the client's own 300 ms timeout ends the wait.
  const auto hung = hanging.send(signed_request({.subscriber_id = 7}, subscriber(7)), 300ms);
  EXPECT_FALSE(hung.response);
  EXPECT_EQ(hung.error, boost::beast::error::timeout) << hung.error.message();

  test_client other(port());
  ASSERT_FALSE(other.connect());
  const auto answered = other.send(signed_request({.subscriber_id = 1}, subscriber(1)));
  ASSERT_TRUE(answered.response) << answered.error.message();
  EXPECT_EQ(answered.response->result_int(), 200u);
}

TEST_F(SinkAnswers, StopClosesHangingConnections) {
  start(R"({"7": {"hang": true}})");
  test_client hanging(port());
  ASSERT_FALSE(hanging.connect());
  std::thread stopper([this] {
    std::this_thread::sleep_for(200ms);
    server_->stop();
  });
  const auto result = hanging.send(signed_request({.subscriber_id = 7}, subscriber(7)), 30s);
  stopper.join();
  EXPECT_FALSE(result.response);
  // Closed by the sink, not abandoned by the client.
  EXPECT_NE(result.error, boost::beast::error::timeout);
  EXPECT_EQ(read_lines(dir_.file("record.csv")).size(), 1u);
}

TEST_F(SinkAnswers, ResetFirstResetsThenAnswersPerDelivery) {
  start(R"({"8": {"reset_first": 2}})");
  for (int attempt = 1; attempt <= 2; ++attempt) {
    const auto reset = post({.subscriber_id = 8, .delivery_id = "80", .attempt = attempt});
    EXPECT_FALSE(reset.response);
    EXPECT_EQ(reset.error, boost::asio::error::connection_reset) << reset.error.message();
  }
  const auto third = post({.subscriber_id = 8, .delivery_id = "80", .attempt = 3});
  ASSERT_TRUE(third.response) << third.error.message();
  EXPECT_EQ(third.response->result_int(), 200u);
  EXPECT_FALSE(post({.subscriber_id = 8, .delivery_id = "81"}).response)
      << "each delivery id has its own count";

  const auto rows = stop_and_read_record();
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0][column_status], "0");
  EXPECT_EQ(rows[1][column_status], "0");
  EXPECT_EQ(rows[2][column_status], "200");
  EXPECT_EQ(rows[3][column_status], "0");
}

TEST_F(SinkAnswers, TrickleSendsTheWholeResponseOneByteAtATime) {
  start(R"({"4": {"trickle_ms": 2}, "5": {"trickle_ms": 60000}})");
  const auto result = post({.subscriber_id = 4}, 30s);
  ASSERT_TRUE(result.response) << result.error.message();
  EXPECT_EQ(result.response->result_int(), 200u);
  EXPECT_EQ(result.response->body(), R"({"ok":true})");
  // A minute after each byte: the response is not whole before the client's 300 ms timeout.
  const auto trickled = post({.subscriber_id = 5}, 300ms);
  EXPECT_FALSE(trickled.response);
  EXPECT_EQ(trickled.error, boost::beast::error::timeout) << trickled.error.message();
}

TEST_F(SinkAnswers, TrickleOutlastsAClientDeadline) {
  start(R"({"4": {"trickle_ms": 100}})");
  const auto result = post({.subscriber_id = 4}, 300ms);
  EXPECT_FALSE(result.response);
  EXPECT_EQ(result.error, boost::beast::error::timeout) << result.error.message();
}

TEST_F(SinkAnswers, BodyBytesStreamsThatManyBytesOnAKeptConnection) {
  start(R"({"4": {"body_bytes": 1000000}})");
  test_client client(port());
  ASSERT_FALSE(client.connect());
  for (int i = 0; i < 2; ++i) {
    const auto result = client.send(signed_request({.subscriber_id = 4}, subscriber(4)));
    ASSERT_TRUE(result.response) << result.error.message();
    EXPECT_EQ(result.response->result_int(), 200u);
    EXPECT_EQ(result.response->body().size(), 1000000u);
    EXPECT_TRUE(result.response->keep_alive());
  }
  EXPECT_EQ(stats().at("streamed_body_bytes").to_number<std::uint64_t>(), 2000000u);
  const auto rows = stop_and_read_record();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][column_connection], rows[1][column_connection]);
}

TEST_F(SinkAnswers, AnnounceLengthSendsFarLessThanItClaims) {
  start(R"({"4": {"announce_length": 1000}})");
  const auto result = post({.subscriber_id = 4}, 300ms);
  EXPECT_FALSE(result.response);
  EXPECT_EQ(result.error, boost::beast::error::timeout) << result.error.message();
  EXPECT_EQ(stats().at("streamed_body_bytes").to_number<std::uint64_t>(), 2u);
}

TEST_F(SinkAnswers, EndlessChunkedNeverEnds) {
  start(R"({"4": {"endless_chunked": true}})");
  const auto result = post({.subscriber_id = 4}, 500ms);
  EXPECT_FALSE(result.response);
  // The client gives up at its body limit (Beast: 8 MB) or at its deadline, whichever is first.
  EXPECT_TRUE(result.error == http::error::body_limit ||
              result.error == boost::beast::error::timeout)
      << result.error.message();
  // The sink counts what it streamed once its next write fails on the closed connection.
  std::uint64_t streamed = 0;
  for (int i = 0; i < 100 && streamed == 0; ++i) {
    streamed = stats().at("streamed_body_bytes").to_number<std::uint64_t>();
    if (streamed == 0) std::this_thread::sleep_for(20ms);
  }
  EXPECT_GT(streamed, 4096u);
}

}  // namespace
}  // namespace surge::sink
