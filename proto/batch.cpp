#include "proto/batch.hpp"

#include <algorithm>
#include <charconv>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <openssl/evp.h>

namespace surge::proto {

bool is_json_value(std::string_view payload) {
  boost::system::error_code ec;
  boost::json::parse(payload, ec);
  return !ec;
}

std::string batch_body(std::span<const std::string_view> payloads) {
  std::int64_t bytes = 0;
  for (const auto payload : payloads) bytes += static_cast<std::int64_t>(payload.size());
  std::string body;
  body.reserve(static_cast<std::size_t>(
      batch_body_bytes(bytes, static_cast<std::int64_t>(payloads.size()))));
  body += '[';
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    if (i > 0) body += ',';
    body += payloads[i];
  }
  body += ']';
  return body;
}

std::int64_t batch_body_bytes(std::int64_t payload_bytes, std::int64_t count) {
  return payload_bytes + 2 + std::max<std::int64_t>(0, count - 1);
}

std::string delivery_ids_header(std::span<const std::int64_t> ids) {
  std::string out;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(ids[i]);
  }
  return out;
}

std::optional<std::vector<std::int64_t>> parse_delivery_ids(std::string_view header) {
  std::vector<std::int64_t> ids;
  while (true) {
    const auto comma = header.find(',');
    const auto item = header.substr(0, comma);
    std::int64_t id = 0;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || error != std::errc{} || end != item.data() + item.size() || id <= 0) {
      return std::nullopt;
    }
    ids.push_back(id);
    if (comma == std::string_view::npos) return ids;
    header.remove_prefix(comma + 1);
  }
}

std::string batch_message_id(std::span<const std::int64_t> ids) {
  std::vector<std::int64_t> sorted(ids.begin(), ids.end());
  std::sort(sorted.begin(), sorted.end());
  const std::string text = delivery_ids_header(sorted);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha256(), nullptr);
  static constexpr char hex[] = "0123456789abcdef";
  std::string id = "msg_batch_";
  for (unsigned int i = 0; i < 8 && i < size; ++i) {
    id += hex[digest[i] >> 4];
    id += hex[digest[i] & 0xf];
  }
  return id;
}

std::optional<std::int64_t> batch_rows_after(int status, std::int64_t rows) {
  if (status != 413 || rows <= 1) return std::nullopt;
  return std::max<std::int64_t>(1, rows / 2);
}

std::optional<std::size_t> batch_event_count(std::string_view body) {
  boost::system::error_code ec;
  const auto parsed = boost::json::parse(body, ec);
  if (ec || !parsed.is_array()) return std::nullopt;
  return parsed.as_array().size();
}

}  // namespace surge::proto
