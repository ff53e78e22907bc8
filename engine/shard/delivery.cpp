#include "engine/shard/delivery.hpp"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/serializer.hpp>

#include "proto/batch.hpp"
#include "proto/header_value.hpp"
#include "proto/outcome.hpp"
#include "proto/retry_after.hpp"

namespace surge::engine {

namespace http = boost::beast::http;

namespace {

std::string failure_text(std::string_view reason, const http_result& result) {
  std::string text(reason);
  if (!result.detail.empty()) text += ": " + result.detail;
  if (result.status != 0 && !result.body_prefix.empty()) {
    text += ": " + result.body_prefix.substr(0, 200);
  }
  return text;
}

}  // namespace

std::optional<std::int64_t> settle_rows(const storage::outcome& judged,
                                        std::span<const storage::claimed_row> rows, bool batched,
                                        const storage::claimed_row& lead, int status,
                                        double finished_unix, std::vector<storage::outcome>& out) {
  out.clear();
  if (!batched) {
    out.push_back(judged);
    return std::nullopt;
  }
  const auto size = static_cast<std::int64_t>(rows.size());
  const auto fits = proto::batch_rows_after(status, size);
  for (const auto& row : rows) {
    auto& outcome = out.emplace_back(outcome_in_batch(judged, lead, row, size));
    if (!fits) continue;
    outcome.kind = storage::outcome_kind::retry;
    outcome.attempts = row.attempts;
    outcome.next_attempt_at = finished_unix;
    outcome.last_error = "413 to a batch of " + std::to_string(size) +
                         " rows: sent again in batches of at most " + std::to_string(*fits);
  }
  return fits;
}

storage::outcome outcome_for(const storage::claimed_row& row, storage::outcome_kind kind) {
  storage::outcome out;
  out.delivery_id = row.id;
  out.lease = row.lease;
  out.kind = kind;
  out.attempts = row.attempts;
  // Written only should the row die (storage/outcomes.hpp).
  if (row.death_stops_key && row.order_key) {
    out.stops_key = storage::stopped_key{
        .subscriber_id = row.subscriber_id, .key = *row.order_key, .delivery_id = row.id};
  }
  return out;
}

std::string delivery_refusal(const storage::claimed_row& row) {
  // The row id and attempt count are integers; the payload is the body, sent as it is.
  if (const auto problem = proto::header_value_problem(row.event_type); !problem.empty()) {
    return "unsafe event_type: " + std::string(problem);
  }
  // A queue that stores signatures at enqueue sends them verbatim; one that is not the hex of
  // an HMAC-SHA256 would only be refused by the partner, so no byte of it goes out.
  if (row.stored_signature) {
    if (const auto problem = proto::stored_signature_problem(*row.stored_signature);
        !problem.empty()) {
      return "unusable signature: " + problem;
    }
  }
  return {};
}

namespace {

// The last line of defence: whatever reaches the wire passes the same rule.
void check_on_wire_rules(const http_request& request) {
  if (const auto problem = proto::request_target_problem(request.target()); !problem.empty()) {
    throw std::invalid_argument("unsafe request target: " + std::string(problem));
  }
  for (const auto& field : request) {
    if (const auto problem = proto::header_value_problem(field.value()); !problem.empty()) {
      throw std::invalid_argument("unsafe " + std::string(field.name_string()) +
                                  " header: " + std::string(problem));
    }
  }
}

// A subscriber's extra headers after Surge's own: a name that would replace or duplicate one of
// them, or change the framing, never reaches the wire, whoever stored it.
void add_extra_headers(http_request& request, std::span<const proto::header_field> extra) {
  for (const auto& field : extra) {
    if (auto problem = proto::extra_header_problem(field); !problem.empty()) {
      throw std::invalid_argument("refused extra " + problem);
    }
    request.insert(field.name, field.value);
  }
}

}  // namespace

http_request build_batch_request(const proto::target& target, const proto::signer& signer,
                                 std::span<const storage::claimed_row> rows,
                                 std::int64_t unix_seconds, std::string_view user_agent,
                                 std::span<const proto::header_field> extra_headers) {
  http_request request{http::verb::post, target.path, 11};
  request.set(http::field::host, target.host_header);
  request.set(http::field::user_agent, user_agent);
  request.set(http::field::content_type, "application/json");
  add_extra_headers(request, extra_headers);
  std::vector<std::string_view> types;
  std::vector<std::int64_t> ids;
  std::vector<std::string_view> payloads;
  ids.reserve(rows.size());
  payloads.reserve(rows.size());
  std::int64_t attempt = 0;
  for (const auto& row : rows) {
    if (std::find(types.begin(), types.end(), row.event_type) == types.end()) {
      types.push_back(row.event_type);
    }
    ids.push_back(row.id);
    payloads.push_back(row.payload);
    attempt = std::max(attempt, row.attempts + 1);
  }
  std::string events;
  for (const auto type : types) events += (events.empty() ? "" : ",") + std::string(type);
  request.set("X-VVV-Event", events);
  request.set("X-VVV-Batch-Size", std::to_string(rows.size()));
  request.set("X-VVV-Delivery-Ids", proto::delivery_ids_header(ids));
  if (!rows.empty()) request.set("X-VVV-Subscriber", std::to_string(rows.front().subscriber_id));
  request.set("X-VVV-Attempt", std::to_string(attempt));
  request.body() = proto::batch_body(payloads);
  const auto signed_fields =
      signer.sign(proto::batch_message_id(ids), unix_seconds, request.body());
  for (std::size_t i = 0; i < signed_fields.size(); ++i) {
    request.set(signed_fields.name(i), signed_fields.value(i));
  }
  request.prepare_payload();
  check_on_wire_rules(request);
  return request;
}

storage::claimed_row batch_lead(std::span<const storage::claimed_row> rows) {
  storage::claimed_row lead = rows.front();
  lead.payload.clear();  // only the scheduling fields are judged
  for (const auto& row : rows) {
    lead.attempts = std::max(lead.attempts, row.attempts);
    lead.created_at = std::max(lead.created_at, row.created_at);
  }
  return lead;
}

storage::outcome outcome_in_batch(const storage::outcome& lead,
                                  const storage::claimed_row& lead_row,
                                  const storage::claimed_row& row, std::int64_t batch_size) {
  storage::outcome out = lead;
  out.delivery_id = row.id;
  out.lease = row.lease;
  const bool counted = lead.attempts != lead_row.attempts;
  out.attempts = row.attempts + (counted ? 1 : 0);
  out.attempt.delivery_id = row.id;
  out.attempt.attempt = row.attempts + 1;
  out.attempt.batch_lead = lead_row.id;
  out.attempt.batch_size = batch_size;
  return out;
}

std::string request_head(const proto::target& target, std::string_view user_agent,
                         std::span<const proto::header_field> extra_headers) {
  http_request head{http::verb::post, target.path, 11};
  head.set(http::field::host, target.host_header);
  head.set(http::field::user_agent, user_agent);
  head.set(http::field::content_type, "application/json");
  add_extra_headers(head, extra_headers);
  check_on_wire_rules(head);
  std::string out;
  write_request(out, head);
  // Beast ends a head with the blank line; the row's own fields follow instead.
  out.resize(out.size() - 2);
  return out;
}

namespace {

void append_field(std::string& out, std::string_view name, std::string_view value) {
  if (const auto problem = proto::header_value_problem(value); !problem.empty()) {
    throw std::invalid_argument("unsafe " + std::string(name) + " header: " + std::string(problem));
  }
  out.append(name).append(": ").append(value).append("\r\n");
}

void append_number_field(std::string& out, std::string_view name, std::int64_t value) {
  char digits[24];
  const auto end = std::to_chars(std::begin(digits), std::end(digits), value).ptr;
  out.append(name).append(": ").append(digits, end).append("\r\n");
}

}  // namespace

void write_delivery_request(std::string& out, std::string_view head, const proto::signer& signer,
                            const storage::claimed_row& row, std::int64_t unix_seconds) {
  out.clear();
  out.append(head);
  append_field(out, "X-VVV-Event", row.event_type);
  append_number_field(out, "X-VVV-Delivery-Id", row.id);
  append_number_field(out, "X-VVV-Subscriber", row.subscriber_id);
  append_number_field(out, "X-VVV-Attempt", row.attempts + 1);
  char message_id[28] = "msg_";
  const auto id_end = std::to_chars(message_id + 4, std::end(message_id), row.id).ptr;
  const auto signed_fields = signer.sign(
      std::string_view(message_id, id_end), unix_seconds, row.payload,
      row.stored_signature ? std::string_view(*row.stored_signature) : std::string_view());
  for (std::size_t i = 0; i < signed_fields.size(); ++i) {
    append_field(out, signed_fields.name(i), signed_fields.value(i));
  }
  append_number_field(out, "Content-Length", static_cast<std::int64_t>(row.payload.size()));
  out.append("\r\n").append(row.payload);
}

void write_request(std::string& out, const http_request& request) {
  out.clear();
  http::request_serializer<http::string_body> serializer{request};
  boost::system::error_code ec;
  while (!ec && !serializer.is_done()) {
    serializer.next(ec, [&](boost::system::error_code&, const auto& buffers) {
      for (const auto buffer : boost::beast::buffers_range_ref(buffers)) {
        out.append(static_cast<const char*>(buffer.data()), buffer.size());
      }
      serializer.consume(boost::beast::buffer_bytes(buffers));
    });
  }
  if (ec) throw std::invalid_argument("serialising a request: " + ec.message());
}

attempt_judgement judge_attempt(const storage::claimed_row& row, std::int64_t subscriber_id,
                                const http_result& result, const attempt_times& times,
                                const proto::retry_policy& policy,
                                std::chrono::seconds retry_after_cap, double unit_random,
                                int unpaid_rate_limits) {
  const auto attempt_number = row.attempts + 1;
  attempt_judgement judged;
  auto& out = judged.outcome;
  out = outcome_for(row, storage::outcome_kind::done);
  out.last_status = result.status;
  out.finished_at = times.finished_unix;
  out.has_attempt = true;
  out.attempt.delivery_id = row.id;
  out.attempt.subscriber_id = subscriber_id;
  out.attempt.attempt = attempt_number;
  out.attempt.started_at = times.started_unix;
  out.attempt.finished_at = times.finished_unix;
  out.attempt.status_code = result.status;
  if (result.status == 0) out.attempt.error_class = std::string(proto::to_string(result.error));

  judged.unpaid_rate_limits = unpaid_rate_limits;

  proto::attempt_result classified;
  classified.status = result.status;
  classified.error = result.error;
  if (!result.retry_after.empty()) {
    classified.retry_after =
        proto::parse_retry_after(result.retry_after, times.now, retry_after_cap);
  }
  const auto age = std::chrono::duration<double>(times.finished_unix - row.created_at);
  const auto decision = proto::decide(classified, static_cast<int>(row.attempts), age, policy,
                                      unit_random, unpaid_rate_limits);
  judged.unpaid_rate_limits = proto::next_unpaid_rate_limits(classified, unpaid_rate_limits);
  out.attempts = decision.counts_attempt ? attempt_number : row.attempts;
  switch (decision.what) {
    case proto::verdict::done: out.kind = storage::outcome_kind::done; break;
    case proto::verdict::retry:
      out.kind = storage::outcome_kind::retry;
      out.next_attempt_at =
          times.finished_unix + std::chrono::duration<double>(decision.delay).count();
      out.last_error = failure_text(decision.reason, result);
      break;
    case proto::verdict::dead:
      out.kind = storage::outcome_kind::dead;
      out.last_error = failure_text(decision.reason, result);
      break;
  }
  judged.pause_subscriber = decision.pause_subscriber;
  judged.deactivate_subscriber = decision.deactivate_subscriber;
  return judged;
}

}  // namespace surge::engine
