#include "tools/sink/request_handler.hpp"

#include <charconv>
#include <cmath>
#include <optional>

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/verb.hpp>

#include <openssl/evp.h>

#include "proto/batch.hpp"
#include "proto/clock.hpp"
#include "storage/database.hpp"

namespace surge::sink {

namespace {

constexpr double stale_after_seconds = 300;  // the Standard Webhooks tolerance

std::optional<std::string_view> header(const http::request_header<>& fields,
                                       std::string_view name) {
  const auto found = fields.find(name);
  if (found == fields.end()) return std::nullopt;
  return found->value();
}

template <class Int>
std::optional<Int> parse_int(std::string_view text) {
  Int value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Parameters such as "; charset=utf-8" are tolerated; the media type is what matters.
bool is_json_content_type(std::string_view value) {
  std::string_view media = value.substr(0, value.find(';'));
  while (!media.empty() && media.back() == ' ') media.remove_suffix(1);
  return boost::beast::iequals(media, "application/json");
}

response_type make_response(unsigned version, bool keep_alive, unsigned status, std::string body) {
  response_type response;
  response.version(version);
  response.result(status);
  response.set(http::field::server, "surge-sink");
  response.set(http::field::content_type, "application/json");
  response.keep_alive(keep_alive);
  response.body() = std::move(body);
  response.prepare_payload();
  return response;
}

}  // namespace

std::string_view subscriber_segment(std::string_view target) {
  target = target.substr(0, target.find('?'));
  const auto slash = target.rfind('/');
  return slash == std::string_view::npos ? target : target.substr(slash + 1);
}

std::string sha256_hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &size, EVP_sha256(), nullptr) != 1) return {};
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (unsigned int i = 0; i < size; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 0xf];
  }
  return out;
}

reply request_handler::handle(const request_type& request, std::uint64_t connection_id,
                              double arrival, std::string_view sni) {
  const std::string_view path = request.target().substr(0, request.target().find('?'));
  // The sink's own endpoints are neither counted nor recorded.
  if (path == "/_sink/stats" && request.method() == http::verb::get) {
    return {action::kind::respond,
            {},
            make_response(request.version(), request.keep_alive(), 200, records_.stats_json())};
  }
  if (path.starts_with("/_sink/")) {
    return {action::kind::respond,
            {},
            make_response(request.version(), request.keep_alive(), 404,
                          R"({"ok":false,"error":"not found"})")};
  }
  return webhook(request, connection_id, arrival, sni);
}

reply request_handler::webhook(const request_type& request, std::uint64_t connection_id,
                               double arrival, std::string_view sni) {
  request_record record = describe(request, connection_id, arrival, sni);
  record.body_sha256 = sha256_hex(request.body());
  if (record.batch_size > 0) {
    const auto events = proto::batch_event_count(request.body());
    record.bad_batch = record.bad_batch || !events || *events != record.batch_size;
  }
  const auto id = parse_int<std::int64_t>(record.subscriber);
  const std::optional<subscriber_key> subscriber = id ? subscribers_.find(*id) : std::nullopt;

  const signature_headers signature{
      header(request, "webhook-signature"), header(request, "webhook-id"),
      header(request, "webhook-timestamp"), header(request, "X-VVV-Signature"),
      header(request, "X-VVV-Timestamp")};
  record.result = judge(subscriber ? &*subscriber : nullptr, signature, request.body());
  if (const auto stamp = signed_timestamp(signature)) {
    const auto seconds = parse_int<std::int64_t>(*stamp);
    record.stale_timestamp =
        !seconds || std::fabs(proto::unix_now() - double(*seconds)) > stale_after_seconds;
  }

  // A batch is judged by its first row, so id-based behaviours (fail even ids) still apply.
  action decided = behaviours_.decide(
      id, std::string_view(record.delivery_id).substr(0, record.delivery_id.find(' ')));
  reply result;
  result.what = decided.what;
  result.delay = decided.delay;
  result.delay_per_request = decided.delay_per_request;
  if (decided.what == action::kind::respond) {
    record.status_sent = decided.status;
    result.response =
        make_response(request.version(), request.keep_alive(), decided.status,
                      decided.status >= 200 && decided.status < 300
                          ? R"({"ok":true})"
                          : R"({"ok":false,"status":)" + std::to_string(decided.status) + "}");
    if (!decided.retry_after.empty())
      result.response.set(http::field::retry_after, decided.retry_after);
    if (!decided.location.empty()) result.response.set(http::field::location, decided.location);
    for (const auto& [name, value] : decided.headers) result.response.insert(name, value);
    result.trickle = decided.trickle;
    result.body = decided.body;
    result.body_length = decided.body_length;
  }
  // Recorded when decided, not when sent: a hanging or delayed request still gets its line even
  // if the client gives up or the sink stops first.
  records_.add(record);
  return result;
}

reply request_handler::too_large(const http::request_header<>& header, std::uint64_t connection_id,
                                 double arrival, std::string_view sni) {
  request_record record = describe(header, connection_id, arrival, sni);
  record.result = verdict::too_large;
  record.status_sent = 413;
  records_.add(record);
  reply result;
  result.response =
      make_response(header.version(), false, 413, R"({"ok":false,"error":"body too large"})");
  return result;
}

request_record request_handler::describe(const http::request_header<>& request,
                                         std::uint64_t connection_id, double arrival,
                                         std::string_view sni) const {
  request_record record;
  record.arrival = arrival;
  record.connection_id = connection_id;
  record.sni = std::string(sni);
  record.subscriber = std::string(subscriber_segment(request.target()));
  const auto delivery_id = header(request, "X-VVV-Delivery-Id");
  const auto attempt = header(request, "X-VVV-Attempt");
  const auto event = header(request, "X-VVV-Event");
  const auto subscriber = header(request, "X-VVV-Subscriber");
  record.delivery_id = std::string(delivery_id.value_or(""));
  record.attempt = std::string(attempt.value_or(""));
  record.event_type = std::string(event.value_or(""));
  record.missing_delivery_headers = !delivery_id || !attempt || !event || !subscriber;
  if (const auto batch_size = header(request, "X-VVV-Batch-Size")) {
    // A batch names its rows in X-VVV-Delivery-Ids and must not carry X-VVV-Delivery-Id.
    const auto size = parse_int<std::uint64_t>(*batch_size);
    const auto ids_header = header(request, "X-VVV-Delivery-Ids");
    const auto ids = ids_header ? proto::parse_delivery_ids(*ids_header) : std::nullopt;
    record.batch_size = size.value_or(0);
    record.bad_batch =
        !size || *size == 0 || !ids || ids->size() != *size || delivery_id.has_value();
    record.missing_delivery_headers = !ids_header || !attempt || !event || !subscriber;
    record.delivery_id.clear();
    if (ids) {
      for (const auto id : *ids) {
        record.delivery_id += (record.delivery_id.empty() ? "" : " ") + std::to_string(id);
      }
    }
  }
  const auto content_type = header(request, "Content-Type");
  record.bad_content_type = !content_type || !is_json_content_type(*content_type);
  return record;
}

}  // namespace surge::sink
