// The sink's side of batches: a batch POST whose headers and array body agree is
// recorded with its size and ids and counted as that many events; one where they disagree is
// counted under problems.bad_batch, so a drain test that uses the sink notices a bad batch.
// Requests are built by hand here, not by the engine, so the sink is checked against the
// documented format rather than against the code that produces it.
#include <gtest/gtest.h>

#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include <boost/json/parse.hpp>

#include "proto/batch.hpp"
#include "proto/signing.hpp"
#include "sink_test_support.hpp"
#include "tools/sink/sink_server.hpp"

namespace surge::sink {
namespace {

using namespace testing;
namespace json = boost::json;

constexpr std::size_t column_delivery = 2, column_verdict = 4, column_batch_size = 10;

struct batch {
  std::int64_t subscriber_id = vvv_id;
  std::string size = "3";
  std::optional<std::string> ids = "11,12,13";
  std::string body = R"([{"video":1},{"video":2},{"video":3}])";
  bool single_id_too = false;  // X-VVV-Delivery-Id as well, which a batch must not carry
};

// A batch as docs/design.md describes it, signed over the whole body in the subscriber's
// scheme (webhook-id: the batch message id of its ids).
request_type batch_request(const batch& b) {
  auto request = unsigned_request({.subscriber_id = b.subscriber_id, .body = b.body});
  request.erase("X-VVV-Delivery-Id");
  if (b.single_id_too) request.set("X-VVV-Delivery-Id", "11");
  request.set("X-VVV-Batch-Size", b.size);
  if (b.ids) request.set("X-VVV-Delivery-Ids", *b.ids);
  const bool standard = b.subscriber_id == standard_id;
  const auto signer =
      proto::signer::create(standard ? proto::signing_scheme::standard : proto::signing_scheme::vvv,
                            standard ? standard_secret : vvv_secret);
  if (!signer) throw std::invalid_argument("cannot sign");
  const auto ids = proto::parse_delivery_ids(b.ids.value_or(""));
  const auto message_id = proto::batch_message_id(ids.value_or(std::vector<std::int64_t>{}));
  const auto fields = signer->sign(message_id, std::time(nullptr), b.body);
  for (std::size_t i = 0; i < fields.size(); ++i) {
    request.set(fields.name(i), fields.value(i));
  }
  request.prepare_payload();
  return request;
}

class SinkBatch : public ::testing::Test {
 protected:
  void SetUp() override {
    queue_ = dir_.file("queue.db");
    create_queue(queue_, default_subscribers());
    sink_config config;
    config.db_path = queue_;
    config.record_path = dir_.file("record.csv");
    config.behaviours = behaviour_set::parse("{}");
    server_ = std::make_unique<sink_server>(std::move(config));
    server_->start();
  }

  unsigned send(const request_type& request) {
    const auto result = send_once(server_->port(), request);
    EXPECT_TRUE(result.response) << result.error.message();
    return result.response ? result.response->result_int() : 0;
  }

  json::object stats() {
    request_type request{http::verb::get, "/_sink/stats", 11};
    request.set(http::field::host, "127.0.0.1");
    const auto result = send_once(server_->port(), request);
    if (!result.response) throw std::runtime_error("stats: " + result.error.message());
    return json::parse(result.response->body()).as_object();
  }

  std::int64_t bad_batches() {
    return stats().at("problems").at("bad_batch").to_number<std::int64_t>();
  }

  std::vector<std::vector<std::string>> stop_and_read_record() {
    server_->stop();
    std::vector<std::vector<std::string>> rows;
    for (const auto& line : read_lines(dir_.file("record.csv"))) rows.push_back(split_csv(line));
    return rows;
  }

  temp_dir dir_;
  std::string queue_;
  std::unique_ptr<sink_server> server_;
};

TEST_F(SinkBatch, AMatchingBatchIsRecordedWithItsSizeAndIds) {
  EXPECT_EQ(send(batch_request({})), 200u);
  // A single-row request beside it: one event, no batch size.
  EXPECT_EQ(
      send(signed_request({.subscriber_id = vvv_id, .delivery_id = "20"}, make_subscriber(vvv_id))),
      200u);
  const auto s = stats();
  EXPECT_EQ(s.at("requests").to_number<std::int64_t>(), 2);
  EXPECT_EQ(s.at("events").to_number<std::int64_t>(), 4);
  EXPECT_EQ(s.at("problems").at("bad_batch").to_number<std::int64_t>(), 0);
  EXPECT_EQ(s.at("problems").at("missing_delivery_headers").to_number<std::int64_t>(), 0);

  const auto rows = stop_and_read_record();
  ASSERT_EQ(rows.size(), 2u);
  ASSERT_GT(rows[0].size(), column_batch_size);
  EXPECT_EQ(rows[0][column_delivery], "11 12 13");
  EXPECT_EQ(rows[0][column_batch_size], "3");
  EXPECT_EQ(rows[0][column_verdict], "ok") << "the signature covers the whole array";
  EXPECT_EQ(rows[1][column_delivery], "20");
  EXPECT_EQ(rows[1][column_batch_size], "0");
}

TEST_F(SinkBatch, AStandardWebhooksBatchVerifies) {
  EXPECT_EQ(
      send(batch_request(
          {.subscriber_id = standard_id, .size = "2", .ids = "7,5", .body = R"([{"a":1}, [2]])"})),
      200u);
  const auto rows = stop_and_read_record();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][column_verdict], "ok");
  EXPECT_EQ(rows[0][column_delivery], "7 5");
  EXPECT_EQ(rows[0][column_batch_size], "2");
}

TEST_F(SinkBatch, ABatchWithATamperedBodyIsBad) {
  auto request = batch_request({});
  request.body() = R"([{"video":1},{"video":2},{"video":4}])";
  request.prepare_payload();
  send(request);
  EXPECT_EQ(bad_batches(), 0) << "the batch itself is well formed";
  const auto rows = stop_and_read_record();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][column_verdict], "bad");
}

TEST_F(SinkBatch, HeadersAndBodyThatDisagreeAreCountedAsBadBatches) {
  struct bad_case {
    const char* what;
    batch b;
  };
  const std::vector<bad_case> cases = {
      {"size 3 but 2 ids", {.ids = "11,12"}},
      {"body not an array", {.size = "1", .ids = "11", .body = R"({"video":1})"}},
      {"array of 2 with size 3", {.body = R"([{"video":1},{"video":2}])"}},
      {"X-VVV-Delivery-Id present too", {.single_id_too = true}},
      {"ids missing", {.ids = std::nullopt}},
      {"an empty id", {.ids = "11,,13"}},
      {"size 0", {.size = "0", .ids = "11", .body = "[]"}},
      {"size not a number", {.size = "three"}},
      {"array of 4 with size 3", {.body = R"([1,2,3,4])"}},
  };
  std::int64_t expected = 0;
  for (const auto& c : cases) {
    send(batch_request(c.b));
    EXPECT_EQ(bad_batches(), ++expected) << c.what;
  }
  // Good batches and single requests after them add nothing.
  send(batch_request({}));
  send(batch_request({.size = "1", .ids = "9", .body = "[7]"}));
  send(signed_request({.subscriber_id = vvv_id}, make_subscriber(vvv_id)));
  EXPECT_EQ(bad_batches(), expected);
}

}  // namespace
}  // namespace surge::sink
