// libFuzzer: header and URL construction with hostile row contents. A subscriber URL, event
// type, payload, ids and secret come from the input. Invariants: whatever parse_target_url
// accepts is a clean request target and Host value; a row is refused exactly when its event type
// holds a byte outside visible ASCII, SP and HTAB; and whenever a request is built, its bytes
// are one request Beast's parser reads whole, and its head has one CRLFCRLF, at its end, and no
// CR or LF inside a line.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

#include <fuzzer/FuzzedDataProvider.h>

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "engine/shard/delivery.hpp"
#include "proto/header_value.hpp"
#include "proto/target_policy.hpp"

namespace {

void check(bool condition) {
  if (!condition) std::abort();
}

// Independent of proto/header_value: the bytes that must never reach a header.
bool has_unsafe_byte(std::string_view text, bool allow_blank) {
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte == '\t' || byte == ' ') {
      if (!allow_blank) return true;
    } else if (byte < 0x21 || byte > 0x7e) {
      return true;
    }
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider input(data, size);
  const std::string url = input.ConsumeRandomLengthString(200);
  surge::storage::claimed_row row;
  row.event_type = input.ConsumeRandomLengthString(100);
  row.id = input.ConsumeIntegral<std::int64_t>();
  row.attempts = input.ConsumeIntegral<std::int64_t>();
  const bool standard = input.ConsumeBool();
  const std::string secret = input.ConsumeRandomLengthString(80);
  const std::string user_agent =
      input.ConsumeBool() ? input.ConsumeRandomLengthString(40) : "Surge/0.1 (+fuzz)";
  const auto timestamp = input.ConsumeIntegral<std::int64_t>();
  row.payload = input.ConsumeRemainingBytesAsString();

  const auto refusal = surge::engine::delivery_refusal(row);
  check(refusal.empty() == !has_unsafe_byte(row.event_type, true));

  const auto parsed = surge::proto::parse_target_url(url);
  if (!parsed.value) return 0;
  const auto& target = *parsed.value;
  check(target.path.starts_with('/') && !has_unsafe_byte(target.path, false));
  check(!has_unsafe_byte(target.host_header, true));

  std::string error;
  const auto signer = surge::proto::signer::create(
      standard ? surge::proto::signing_scheme::standard : surge::proto::signing_scheme::vvv, secret,
      &error);
  if (!signer) return 0;

  const bool unsafe = !refusal.empty() || has_unsafe_byte(user_agent, true);
  std::string message;
  try {
    surge::engine::write_delivery_request(message, surge::engine::request_head(target, user_agent),
                                          *signer, row, timestamp);
  } catch (const std::invalid_argument&) {
    check(unsafe);  // only unsafe input is refused, and unsafe input always is
    return 0;
  }
  check(!unsafe);

  check(message.size() >= row.payload.size());
  const std::string head = message.substr(0, message.size() - row.payload.size());
  check(head.ends_with("\r\n\r\n"));
  check(head.find("\r\n\r\n") == head.size() - 4);
  std::size_t lines = 0;
  for (std::size_t at = 0; at < head.size() - 2;) {
    const auto end = head.find("\r\n", at);
    const std::string_view line(head.data() + at, end - at);
    check(line.find('\r') == std::string_view::npos && line.find('\n') == std::string_view::npos);
    if (lines == 0) {
      check(line == "POST " + target.path + " HTTP/1.1");
    } else {
      check(line.find(": ") != std::string_view::npos);
    }
    ++lines;
    at = end + 2;
  }
  // An independent parser (Beast's) reads exactly one request: every line a field, the payload
  // its body, whole.
  boost::beast::http::request_parser<boost::beast::http::string_body> parser;
  parser.body_limit(boost::none);
  parser.eager(true);  // the body in the same call as the header
  boost::system::error_code ec;
  const auto used = parser.put(boost::asio::buffer(message), ec);
  check(!ec && parser.is_done() && used == message.size());
  const auto& request = parser.get();
  check(request.body() == row.payload);
  check(lines == 1 + static_cast<std::size_t>(std::distance(request.begin(), request.end())));
  return 0;
}
