// The pure engine parts of batches: the request a batch goes out as, and how
// the one decision made for the batch becomes each row's outcome. Signatures are checked with
// proto's receiver-side verify functions, as a partner would check them.
#include "engine/shard/delivery.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <boost/json/parse.hpp>

#include "proto/batch.hpp"

#include "tests/engine/shard/attempt_fixtures.hpp"

namespace surge::engine {
namespace {

using testing::answered;
using testing::times_at;

using namespace std::chrono_literals;
namespace http = boost::beast::http;

storage::claimed_row row_of(std::int64_t id, std::string type, std::string payload,
                            std::int64_t attempts, double created_at) {
  storage::claimed_row row;
  row.id = id;
  row.subscriber_id = 7;
  row.event_type = std::move(type);
  row.payload = std::move(payload);
  row.payload_bytes = static_cast<std::int64_t>(row.payload.size());
  row.attempts = attempts;
  row.created_at = created_at;
  row.next_attempt_at = created_at;
  row.lease = 1'700'000'060.0 + static_cast<double>(id) / 1000;  // each row its own fence
  return row;
}

std::vector<storage::claimed_row> three_rows() {
  return {row_of(11, "video.rank_updated", R"({"video":"v1", "rank": 3})", 0, 1'700'000'000),
          row_of(12, "video.trending", R"({"video":"v2","views":1e6})", 3, 1'699'999'000),
          row_of(13, "video.rank_updated", R"([1, "two"])", 1, 1'700'000'005)};
}

proto::target sample_target() {
  return *proto::parse_target_url("https://partner.example:8443/hooks/in?x=1").value;
}

TEST(BatchRequest, BodyIsTheArrayOfPayloadsAndTheHeadersDescribeIt) {
  const auto signer = proto::signer::create(proto::signing_scheme::vvv, "secret").value();
  const auto rows = three_rows();
  const auto request = build_batch_request(sample_target(), signer, rows, 1'700'000'100, "ua");
  EXPECT_EQ(request.method(), http::verb::post);
  EXPECT_EQ(request.target(), "/hooks/in?x=1");
  EXPECT_EQ(request.body(), R"([{"video":"v1", "rank": 3},{"video":"v2","views":1e6},[1, "two"]])");
  EXPECT_EQ(request[http::field::content_length], std::to_string(request.body().size()));
  EXPECT_EQ(request[http::field::content_type], "application/json");
  EXPECT_EQ(request["X-VVV-Batch-Size"], "3");
  EXPECT_EQ(request["X-VVV-Delivery-Ids"], "11,12,13");
  EXPECT_EQ(request.find("X-VVV-Delivery-Id"), request.end());
  // The highest attempt among the rows: row 12 has been tried 3 times, so this is its 4th.
  EXPECT_EQ(request["X-VVV-Attempt"], "4");
  EXPECT_EQ(request["X-VVV-Event"], "video.rank_updated,video.trending");
  // What a receiver does with the headers: one event per id, in body order.
  const auto ids = proto::parse_delivery_ids(request["X-VVV-Delivery-Ids"]);
  ASSERT_TRUE(ids);
  EXPECT_EQ(proto::batch_event_count(request.body()), ids->size());
}

TEST(BatchRequest, QueueOrderIsKeptNotSorted) {
  const auto signer = proto::signer::create(proto::signing_scheme::vvv, "secret").value();
  auto rows = three_rows();
  std::swap(rows[0], rows[2]);
  const auto request = build_batch_request(sample_target(), signer, rows, 1000, "ua");
  EXPECT_EQ(request["X-VVV-Delivery-Ids"], "13,12,11");
  EXPECT_EQ(request["X-VVV-Event"], "video.rank_updated,video.trending");
  const auto body = boost::json::parse(request.body()).as_array();
  ASSERT_EQ(body.size(), 3u);
  EXPECT_EQ(body[0], boost::json::parse(R"([1, "two"])"));
  EXPECT_EQ(body[2], boost::json::parse(R"({"video":"v1","rank":3})"));
}

TEST(BatchRequest, VvvSignatureCoversTheWholeBody) {
  const auto signer = proto::signer::create(proto::signing_scheme::vvv, "secret").value();
  const auto rows = three_rows();
  const auto request = build_batch_request(sample_target(), signer, rows, 1'700'000'100, "ua");
  EXPECT_EQ(request["X-VVV-Timestamp"], "1700000100");
  const std::string signature(request["X-VVV-Signature"]);
  EXPECT_TRUE(proto::verify_vvv("secret", "1700000100", request.body(), signature));
  // Not over one payload, nor with another key or time.
  EXPECT_FALSE(proto::verify_vvv("secret", "1700000100", rows[0].payload, signature));
  EXPECT_FALSE(proto::verify_vvv("other", "1700000100", request.body(), signature));
  EXPECT_FALSE(proto::verify_vvv("secret", "1700000101", request.body(), signature));
}

TEST(BatchRequest, StandardSignatureCoversTheBodyUnderAStableBatchId) {
  const std::string secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  const auto signer = proto::signer::create(proto::signing_scheme::standard, secret).value();
  auto rows = three_rows();
  const auto first = build_batch_request(sample_target(), signer, rows, 1000, "ua");
  const std::string id(first["webhook-id"]);
  const std::vector<std::int64_t> ids = {11, 12, 13};
  EXPECT_EQ(id, proto::batch_message_id(ids));
  EXPECT_EQ(first["webhook-timestamp"], "1000");
  EXPECT_TRUE(proto::verify_standard(secret, id, "1000", first.body(),
                                     std::string(first["webhook-signature"])));
  EXPECT_FALSE(proto::verify_standard(secret, "msg_11", "1000", first.body(),
                                      std::string(first["webhook-signature"])));

  // The same rows retried later, one attempt further on: same id, fresh signature.
  for (auto& row : rows) ++row.attempts;
  const auto retried = build_batch_request(sample_target(), signer, rows, 2000, "ua");
  EXPECT_EQ(retried["webhook-id"], id);
  EXPECT_EQ(retried["X-VVV-Attempt"], "5");
  EXPECT_TRUE(proto::verify_standard(secret, id, "2000", retried.body(),
                                     std::string(retried["webhook-signature"])));
  // Rebuilt in another order (rows re-claimed differently): still the same message.
  std::reverse(rows.begin(), rows.end());
  const auto reordered = build_batch_request(sample_target(), signer, rows, 2000, "ua");
  EXPECT_EQ(reordered["webhook-id"], id);
  EXPECT_EQ(reordered["X-VVV-Delivery-Ids"], "13,12,11");
  // A different set of rows is a different message.
  rows.pop_back();
  const auto smaller = build_batch_request(sample_target(), signer, rows, 2000, "ua");
  EXPECT_NE(smaller["webhook-id"], id);
  EXPECT_TRUE(proto::verify_standard(secret, std::string(smaller["webhook-id"]), "2000",
                                     smaller.body(), std::string(smaller["webhook-signature"])));
}

TEST(BatchRequest, AnUnsafeEventTypeInAnyRowIsRefused) {
  const auto signer = proto::signer::create(proto::signing_scheme::vvv, "secret").value();
  auto rows = three_rows();
  rows[2].event_type = "a\r\nX-Injected: 1";
  EXPECT_THROW(build_batch_request(sample_target(), signer, rows, 1000, "ua"),
               std::invalid_argument);
}

TEST(BatchLead, TakesTheFirstRowWithTheHighestAttemptsAndLatestCreation) {
  const auto rows = three_rows();
  const auto lead = batch_lead(rows);
  EXPECT_EQ(lead.id, 11);
  EXPECT_EQ(lead.lease, rows[0].lease);
  EXPECT_EQ(lead.attempts, 3);
  EXPECT_EQ(lead.created_at, 1'700'000'005);
  EXPECT_TRUE(lead.payload.empty());
}

// Every row's outcome for the batch's one judgement, as the shard writes them.
std::vector<storage::outcome> outcomes_for(
    const std::vector<storage::claimed_row>& rows, const http_result& result,
    const proto::retry_policy& policy = proto::retry_policy{}) {
  const auto lead = batch_lead(rows);
  const auto judged = judge_attempt(lead, 7, result, times_at(1'700'000'010), policy, 3600s, 0.5);
  std::vector<storage::outcome> out;
  for (const auto& row : rows) {
    out.push_back(outcome_in_batch(judged.outcome, lead, row, std::ssize(rows)));
  }
  return out;
}

void expect_row_fields(const storage::outcome& out, const storage::claimed_row& row,
                       std::int64_t lead_id, std::int64_t size) {
  EXPECT_EQ(out.delivery_id, row.id);
  EXPECT_EQ(out.lease, row.lease) << "each row is fenced on its own lease";
  EXPECT_TRUE(out.has_attempt);
  EXPECT_EQ(out.attempt.delivery_id, row.id);
  EXPECT_EQ(out.attempt.subscriber_id, 7);
  EXPECT_EQ(out.attempt.attempt, row.attempts + 1);
  EXPECT_EQ(out.attempt.batch_lead, lead_id);
  EXPECT_EQ(out.attempt.batch_size, size);
}

TEST(OutcomeInBatch, SuccessIsDoneForEveryRowWithItsOwnCount) {
  const auto rows = three_rows();
  const auto outs = outcomes_for(rows, answered(200));
  ASSERT_EQ(outs.size(), 3u);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(i);
    expect_row_fields(outs[i], rows[i], 11, 3);
    EXPECT_EQ(outs[i].kind, storage::outcome_kind::done);
    EXPECT_EQ(outs[i].attempts, rows[i].attempts + 1);
    EXPECT_EQ(outs[i].attempt.status_code, 200);
    EXPECT_EQ(outs[i].last_status, 200);
  }
}

TEST(OutcomeInBatch, AFailureRetriesEveryRowWithOneSharedBackoffAndError) {
  auto result = answered(503);
  result.body_prefix = "overloaded";
  const auto rows = three_rows();
  const auto outs = outcomes_for(rows, result);
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_GT(outs[0].next_attempt_at, 1'700'000'010.25);
  EXPECT_NE(outs[0].last_error.find("overloaded"), std::string::npos);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(i);
    expect_row_fields(outs[i], rows[i], 11, 3);
    EXPECT_EQ(outs[i].kind, storage::outcome_kind::retry);
    EXPECT_EQ(outs[i].next_attempt_at, outs[0].next_attempt_at);
    EXPECT_EQ(outs[i].last_error, outs[0].last_error);
    EXPECT_EQ(outs[i].attempts, rows[i].attempts + 1);
  }
}

TEST(OutcomeInBatch, ATooManyRequestsCountsNoAttemptForAnyRow) {
  const auto rows = three_rows();
  const auto outs = outcomes_for(rows, answered(429, "30"));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(i);
    expect_row_fields(outs[i], rows[i], 11, 3);  // the audit still sees what was sent
    EXPECT_EQ(outs[i].kind, storage::outcome_kind::retry);
    EXPECT_EQ(outs[i].attempts, rows[i].attempts);
    EXPECT_NEAR(outs[i].next_attempt_at, 1'700'000'010.25 + 30, 1e-6);
  }
}

TEST(OutcomeInBatch, TheMostTriedRowDecidesWhenTheBatchIsDead) {
  // Row 12 has 3 attempts: its 4th is the last the policy allows, so the batch is dead as a
  // whole, even for rows tried less often (retrying them alone would need another POST shape).
  const proto::retry_policy policy(
      {.base_delay = 1s, .max_delay = 1h, .max_attempts = 4, .max_age = 24h});
  const auto rows = three_rows();
  const auto outs = outcomes_for(rows, answered(500), policy);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(i);
    expect_row_fields(outs[i], rows[i], 11, 3);
    EXPECT_EQ(outs[i].kind, storage::outcome_kind::dead);
    EXPECT_EQ(outs[i].attempts, rows[i].attempts + 1);
    EXPECT_FALSE(outs[i].last_error.empty());
  }
  // One attempt fewer on the most-tried row and the batch retries.
  auto fresher = rows;
  fresher[1].attempts = 2;
  for (const auto& out : outcomes_for(fresher, answered(500), policy)) {
    EXPECT_EQ(out.kind, storage::outcome_kind::retry);
  }
}

}  // namespace
}  // namespace surge::engine

namespace surge::engine {
namespace {

// What settle_rows makes of an answer with `status` to `rows` (a batch when there are several).
struct settled {
  std::vector<storage::outcome> outcomes;
  std::optional<std::int64_t> batch_fits;
};
settled settled_for(std::span<const storage::claimed_row> rows, int status) {
  const bool batched = rows.size() > 1;
  const auto lead = batched ? batch_lead(rows) : rows.front();
  const auto judged = judge_attempt(lead, 7, answered(status), times_at(1'700'000'010),
                                    proto::retry_policy{}, 3600s, 0.5);
  settled out;
  out.outcomes.push_back({});  // what an earlier attempt left: cleared
  out.batch_fits =
      settle_rows(judged.outcome, rows, batched, lead, status, 1'700'000'010.25, out.outcomes);
  return out;
}

TEST(SettleRows, OneRowTakesItsJudgementAsItIs) {
  const auto rows = three_rows();
  const auto settled = settled_for(std::span(rows.data(), 1), 200);
  ASSERT_EQ(settled.outcomes.size(), 1u);
  EXPECT_EQ(settled.outcomes[0].delivery_id, rows[0].id);
  EXPECT_EQ(settled.outcomes[0].kind, storage::outcome_kind::done);
  EXPECT_FALSE(settled.batch_fits);
}

// One judgement for the batch; the partner counted the POST in both cases, so each row's is
// recorded. A 413 uses up no attempt: every row is due again at once, in batches of at most half
// the size.
TEST(SettleRows, EachRowOfABatchTakesTheLeadsJudgementAndA413SendsThemAgainInSmallerBatches) {
  const auto rows = three_rows();
  for (const int status : {503, 413}) {
    SCOPED_TRACE(status);
    const auto settled = settled_for(rows, status);
    ASSERT_EQ(settled.outcomes.size(), 3u);
    EXPECT_EQ(settled.batch_fits, status == 413 ? std::optional<std::int64_t>(1) : std::nullopt);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto& out = settled.outcomes[i];
      expect_row_fields(out, rows[i], 11, 3);
      EXPECT_EQ(out.kind, storage::outcome_kind::retry);
      if (status != 413) continue;
      EXPECT_EQ(out.attempts, rows[i].attempts);
      EXPECT_EQ(out.next_attempt_at, 1'700'000'010.25);
      EXPECT_EQ(out.last_error, "413 to a batch of 3 rows: sent again in batches of at most 1");
    }
  }
}

}  // namespace
}  // namespace surge::engine
