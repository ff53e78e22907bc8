#include "engine/shard/delivery.hpp"

#include <gtest/gtest.h>
#include <cctype>
#include <stdexcept>
#include <string>

#include <boost/beast/http/parser.hpp>

#include "tests/engine/shard/attempt_fixtures.hpp"

namespace surge::engine {
namespace {

using testing::answered;
using testing::times_at;

using namespace std::chrono_literals;

storage::claimed_row sample_row(std::int64_t attempts = 0) {
  storage::claimed_row row;
  row.id = 4242;
  row.subscriber_id = 7;
  row.event_type = "video.trending";
  row.payload = R"({"video":"v1", "views": 1e6})";
  row.attempts = attempts;
  row.created_at = 1'700'000'000.0;
  row.lease = 1'700'000'060.000123;
  return row;
}

proto::target sample_target() {
  return *proto::parse_target_url("https://partner.example:8443/hooks/in?x=1").value;
}

// The request's bytes as Beast's parser, which Surge's writer does not use, reads them; the
// whole buffer must be exactly one request.
http_request parse_request(const std::string& wire) {
  boost::beast::http::request_parser<boost::beast::http::string_body> parser;
  parser.eager(true);  // the body in the same call as the header
  boost::system::error_code ec;
  const auto used = parser.put(boost::asio::buffer(wire), ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(parser.is_done());
  EXPECT_EQ(used, wire.size());
  return parser.release();
}

http_request build(const proto::target& target, const proto::signer& signer,
                   const storage::claimed_row& row, std::int64_t unix_seconds,
                   std::string_view user_agent) {
  std::string wire;
  write_delivery_request(wire, request_head(target, user_agent), signer, row, unix_seconds);
  return parse_request(wire);
}

TEST(DeliveryRequest, CarriesThePayloadUnchangedAndEveryHeader) {
  const auto signer = proto::signer::create(proto::signing_scheme::vvv, "secret").value();
  const auto row = sample_row(2);
  const auto request = build(sample_target(), signer, row, 1'700'000'100, "Surge/test");
  EXPECT_EQ(request.method(), boost::beast::http::verb::post);
  EXPECT_EQ(request.target(), "/hooks/in?x=1");
  EXPECT_EQ(request[boost::beast::http::field::host], "partner.example:8443");
  EXPECT_EQ(request.body(), row.payload);
  EXPECT_EQ(request[boost::beast::http::field::content_type], "application/json");
  EXPECT_EQ(request[boost::beast::http::field::content_length], std::to_string(row.payload.size()));
  EXPECT_EQ(request["X-VVV-Event"], "video.trending");
  EXPECT_EQ(request["X-VVV-Delivery-Id"], "4242");
  EXPECT_EQ(request["X-VVV-Subscriber"], "7");
  EXPECT_EQ(request["X-VVV-Attempt"], "3");
  EXPECT_EQ(request[boost::beast::http::field::user_agent], "Surge/test");
  EXPECT_EQ(request["X-VVV-Timestamp"], "1700000100");
  EXPECT_TRUE(proto::verify_vvv("secret", "1700000100", row.payload,
                                std::string(request["X-VVV-Signature"])));
}

TEST(DeliveryRequest, AStoredSignatureIsSentVerbatimOnEveryAttempt) {
  const auto signer = proto::signer::create(proto::signing_scheme::stored, "secret").value();
  auto row = sample_row(4);
  row.stored_signature = proto::stored_signature_for("secret", row.payload);
  EXPECT_EQ(delivery_refusal(row), "");
  for (const std::int64_t at : {1'700'000'100, 1'700'009'999}) {
    const auto request = build(sample_target(), signer, row, at, "Surge/test");
    EXPECT_EQ(request["X-VVV-Signature"], *row.stored_signature);
    EXPECT_EQ(request.count("X-VVV-Timestamp"), 0u);
    EXPECT_EQ(request["X-VVV-Attempt"], "5");
    EXPECT_EQ(request["X-VVV-Subscriber"], "7");
    EXPECT_EQ(request.body(), row.payload);
  }
}

TEST(DeliveryRequest, AStoredSignatureThatIsNotLowercaseHexIsRefused) {
  auto row = sample_row();
  const auto good = proto::stored_signature_for("secret", row.payload);
  std::string upper = good;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const std::string& bad :
       {std::string(), good.substr(1), upper, "sha256=" + good, good + "\r\nX-Injected: 1"}) {
    row.stored_signature = bad;
    EXPECT_NE(delivery_refusal(row).find("unusable signature"), std::string::npos) << bad;
  }
}

TEST(DeliveryRequest, AnEventTypeThatWouldInjectIsRefused) {
  auto row = sample_row();
  EXPECT_EQ(delivery_refusal(row), "");
  row.event_type = "video.x\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
  EXPECT_EQ(delivery_refusal(row), "unsafe event_type: contains CR/LF");
  row.event_type = std::string("video\0x", 7);
  EXPECT_EQ(delivery_refusal(row), "unsafe event_type: contains NUL");
  // Payload bytes are the body, not a header: anything goes.
  auto body = sample_row();
  body.payload = "{\"a\":\"\r\n\r\nGET / HTTP/1.1\"}";
  EXPECT_EQ(delivery_refusal(body), "");
}

TEST(DeliveryRequest, BuildingNeverPutsAnUnsafeValueOnTheWire) {
  const auto signer = proto::signer::create(proto::signing_scheme::vvv, "secret").value();
  auto row = sample_row();
  row.event_type = "a\r\nX-Injected: 1";
  EXPECT_THROW(build(sample_target(), signer, row, 1000, "ua"), std::invalid_argument);
  EXPECT_THROW(build(sample_target(), signer, sample_row(), 1000, "ua\n"), std::invalid_argument);
  auto target = sample_target();
  target.path = "/x HTTP/1.1\r\nHost: evil\r\n\r\nGET /";
  EXPECT_THROW(build(target, signer, sample_row(), 1000, "ua"), std::invalid_argument);
}

TEST(DeliveryRequest, AReusedBufferHoldsOnlyTheNewRequestAndKeepsItsMemory) {
  const auto signer = proto::signer::create(proto::signing_scheme::vvv, "secret").value();
  const auto head = request_head(sample_target(), "ua");
  auto big = sample_row();
  big.payload = std::string(5000, 'x');
  std::string wire;
  write_delivery_request(wire, head, signer, big, 1000);
  const auto capacity = wire.capacity();
  const auto* memory = wire.data();
  const auto small = sample_row(1);
  write_delivery_request(wire, head, signer, small, 1001);
  EXPECT_EQ(wire.data(), memory);  // no new allocation
  EXPECT_EQ(wire.capacity(), capacity);
  const auto request = parse_request(wire);
  EXPECT_EQ(request.body(), small.payload);
  EXPECT_EQ(request["X-VVV-Attempt"], "2");
}

TEST(DeliveryRequest, TheHeadIsTheRequestLineAndTheSharedHeadersOnly) {
  EXPECT_EQ(request_head(sample_target(), "Surge/test"),
            "POST /hooks/in?x=1 HTTP/1.1\r\nHost: partner.example:8443\r\n"
            "User-Agent: Surge/test\r\nContent-Type: application/json\r\n");
}

TEST(DeliveryRequest, StandardWebhooksIdIsStableAcrossAttempts) {
  const std::string secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  const auto signer = proto::signer::create(proto::signing_scheme::standard, secret).value();
  const auto first = build(sample_target(), signer, sample_row(0), 1000, "ua");
  const auto later = build(sample_target(), signer, sample_row(5), 2000, "ua");
  EXPECT_EQ(first["webhook-id"], later["webhook-id"]);
  EXPECT_EQ(first["webhook-timestamp"], "1000");
  EXPECT_EQ(later["webhook-timestamp"], "2000");
  EXPECT_TRUE(proto::verify_standard(secret, std::string(later["webhook-id"]), "2000",
                                     sample_row().payload,
                                     std::string(later["webhook-signature"])));
}

// The order docs/cli.md gives: after Host, User-Agent and Content-Type, before the delivery's own
// fields, in the order the operator gave them.
TEST(DeliveryRequest, ExtraHeadersComeBetweenTheHeadAndTheDeliverysOwnFields) {
  const std::vector<proto::header_field> extra = {{"Authorization", "Bearer x"},
                                                  {"X-Api-Key", "k"}};
  EXPECT_EQ(request_head(sample_target(), "Surge/test", extra),
            "POST /hooks/in?x=1 HTTP/1.1\r\nHost: partner.example:8443\r\n"
            "User-Agent: Surge/test\r\nContent-Type: application/json\r\n"
            "Authorization: Bearer x\r\nX-Api-Key: k\r\n");
  const auto signer = proto::signer::create(proto::signing_scheme::vvv, "secret").value();
  std::string wire;
  write_delivery_request(wire, request_head(sample_target(), "ua", extra), signer, sample_row(),
                         1000);
  EXPECT_LT(wire.find("X-Api-Key: k\r\n"), wire.find("X-VVV-Event:")) << wire;
  const auto request = parse_request(wire);
  EXPECT_EQ(request["Authorization"], "Bearer x");
  EXPECT_EQ(request["X-Api-Key"], "k");
  EXPECT_EQ(request.body(), sample_row().payload);
  const storage::claimed_row rows[] = {sample_row(), sample_row()};
  const auto batch = build_batch_request(sample_target(), signer, rows, 1000, "ua", extra);
  EXPECT_EQ(batch["Authorization"], "Bearer x");
  EXPECT_EQ(batch["X-Api-Key"], "k");
  std::string batch_wire;
  write_request(batch_wire, batch);
  EXPECT_LT(batch_wire.find("Content-Type:"), batch_wire.find("Authorization:")) << batch_wire;
  EXPECT_LT(batch_wire.find("X-Api-Key: k\r\n"), batch_wire.find("X-VVV-Event:")) << batch_wire;
}

TEST(DeliveryRequest, ExtraHeadersThatWouldOverrideOrInjectNeverReachTheWire) {
  const std::vector<proto::header_field> host = {{"host", "evil.example"}};
  EXPECT_THROW(request_head(sample_target(), "ua", host), std::invalid_argument);
  const std::vector<proto::header_field> injected = {{"X-Key", "a\r\nHost: evil"}};
  EXPECT_THROW(request_head(sample_target(), "ua", injected), std::invalid_argument);
  const auto signer = proto::signer::create(proto::signing_scheme::vvv, "secret").value();
  const storage::claimed_row rows[] = {sample_row()};
  EXPECT_THROW(build_batch_request(sample_target(), signer, rows, 1000, "ua", host),
               std::invalid_argument);
}

// Whatever Surge writes on a request, in every signing scheme and as a batch, is a name an
// operator's extra header may not take: read from the requests themselves, so a header added to
// them later is covered without touching the rule's test.
TEST(DeliveryRequest, EveryHeaderSurgeWritesIsRefusedAsAnExtraHeader) {
  std::vector<http_request> requests;
  auto row = sample_row();
  for (const auto scheme : {proto::signing_scheme::vvv, proto::signing_scheme::standard}) {
    const auto signer = proto::signer::create(scheme, scheme == proto::signing_scheme::standard
                                                          ? "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
                                                          : "secret")
                            .value();
    requests.push_back(build(sample_target(), signer, row, 1000, "ua"));
    const storage::claimed_row rows[] = {sample_row(), sample_row()};
    requests.push_back(build_batch_request(sample_target(), signer, rows, 1000, "ua"));
  }
  const auto stored = proto::signer::create(proto::signing_scheme::stored, "s").value();
  row.stored_signature = std::string(64, 'a');
  requests.push_back(build(sample_target(), stored, row, 1000, "ua"));
  std::size_t names = 0;
  for (const auto& request : requests) {
    for (const auto& field : request) {
      ++names;
      EXPECT_NE(proto::extra_header_name_problem(field.name_string()), "")
          << field.name_string() << " is written by Surge but allowed as an extra header";
    }
  }
  EXPECT_GT(names, 30u);
}

TEST(JudgeAttempt, SuccessIsDoneWithAnAttemptRecord) {
  const auto judged = judge_attempt(sample_row(1), 7, answered(204), times_at(1'700'000'010),
                                    proto::retry_policy{}, 3600s, 0.5);
  EXPECT_EQ(judged.outcome.kind, storage::outcome_kind::done);
  EXPECT_EQ(judged.outcome.attempts, 2);
  EXPECT_EQ(judged.outcome.lease, sample_row().lease);  // the fence
  EXPECT_TRUE(judged.outcome.has_attempt);
  EXPECT_EQ(judged.outcome.attempt.attempt, 2);
  EXPECT_EQ(judged.outcome.attempt.status_code, 204);
  EXPECT_DOUBLE_EQ(judged.outcome.attempt.finished_at - judged.outcome.attempt.started_at, 0.25);
}

TEST(JudgeAttempt, ServerErrorRetriesAfterTheBackoffWithTheReason) {
  auto result = answered(500);
  result.body_prefix = "database on fire";
  const proto::retry_policy policy(
      {.base_delay = 2s, .max_delay = 1h, .max_attempts = 8, .max_age = 24h});
  const auto judged =
      judge_attempt(sample_row(0), 7, result, times_at(1'700'000'010), policy, 3600s, 0.0);
  EXPECT_EQ(judged.outcome.kind, storage::outcome_kind::retry);
  EXPECT_EQ(judged.outcome.attempts, 1);
  // Equal jitter with unit 0: half the nominal 2 s.
  EXPECT_NEAR(judged.outcome.next_attempt_at, 1'700'000'010.25 + 1.0, 1e-6);
  EXPECT_NE(judged.outcome.last_error.find("database on fire"), std::string::npos);
  EXPECT_FALSE(judged.pause_subscriber);
}

TEST(JudgeAttempt, UnpaidTooManyRequestsCostAnAttemptPastTheCap) {
  const proto::retry_policy policy;
  const int cap = policy.config().max_unpaid_rate_limits;
  // A garbled Retry-After is no Retry-After.
  auto judged = judge_attempt(sample_row(3), 7, answered(429, "soon"), times_at(1'700'000'010),
                              policy, 3600s, 0.5, cap - 1);
  EXPECT_EQ(judged.outcome.attempts, 3);
  EXPECT_EQ(judged.unpaid_rate_limits, cap);
  judged = judge_attempt(sample_row(3), 7, answered(429), times_at(1'700'000'010), policy, 3600s,
                         0.5, cap);
  EXPECT_EQ(judged.outcome.kind, storage::outcome_kind::retry);
  EXPECT_EQ(judged.outcome.attempts, 4);
  EXPECT_TRUE(judged.pause_subscriber);
  EXPECT_EQ(judged.unpaid_rate_limits, cap + 1);
  judged = judge_attempt(sample_row(3), 7, answered(200), times_at(1'700'000'010), policy, 3600s,
                         0.5, cap + 1);
  EXPECT_EQ(judged.unpaid_rate_limits, 0);
}

TEST(JudgeAttempt, TooManyRequestsPausesAndCostsNoAttempt) {
  const auto judged = judge_attempt(sample_row(3), 7, answered(429, "30"), times_at(1'700'000'010),
                                    proto::retry_policy{}, 3600s, 0.5);
  EXPECT_EQ(judged.outcome.kind, storage::outcome_kind::retry);
  EXPECT_EQ(judged.outcome.attempts, 3);
  ASSERT_TRUE(judged.pause_subscriber);
  EXPECT_EQ(*judged.pause_subscriber, 30s);
  EXPECT_NEAR(judged.outcome.next_attempt_at, 1'700'000'010.25 + 30, 1e-6);
  EXPECT_EQ(judged.outcome.attempt.attempt, 4);  // the audit still counts what was sent
}

TEST(JudgeAttempt, GoneDeadLettersAndDeactivates) {
  const auto judged = judge_attempt(sample_row(0), 7, answered(410), times_at(1'700'000'010),
                                    proto::retry_policy{}, 3600s, 0.5);
  EXPECT_EQ(judged.outcome.kind, storage::outcome_kind::dead);
  EXPECT_TRUE(judged.deactivate_subscriber);
}

TEST(JudgeAttempt, TransportErrorsAreRecordedByClass) {
  http_result result;
  result.error = proto::transport_error::timeout;
  const auto judged = judge_attempt(sample_row(0), 7, result, times_at(1'700'000'010),
                                    proto::retry_policy{}, 3600s, 0.5);
  EXPECT_EQ(judged.outcome.kind, storage::outcome_kind::retry);
  EXPECT_EQ(judged.outcome.attempt.status_code, 0);
  EXPECT_EQ(judged.outcome.attempt.error_class, "timeout");
}

}  // namespace
}  // namespace surge::engine
