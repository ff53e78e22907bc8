// libFuzzer: the response-handling path. Bytes from a hostile endpoint go through the same
// parser setup as the HTTP client (header unlimited, body capped), then Retry-After parsing and
// the outcome decision; the body kept never exceeds the cap.
#include <chrono>
#include <cstdint>
#include <cstdlib>

#include <boost/asio/buffer.hpp>

#include "engine/net/response_parser.hpp"
#include "proto/outcome.hpp"
#include "proto/retry_after.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  surge::engine::http_client_config config;
  surge::engine::response_parser parser;
  surge::engine::prepare_for_header(parser, config);
  parser.eager(false);
  boost::beast::error_code ec;
  // Beast parses a header from one contiguous buffer, as the client's flat_buffer provides.
  std::size_t offset = parser.put(boost::asio::buffer(data, size), ec);
  if (ec) return 0;
  if (!parser.is_header_done()) return 0;
  surge::proto::attempt_result result;
  result.status = parser.status();
  if (!parser.retry_after().empty()) {
    result.retry_after = surge::proto::parse_retry_after(
        parser.retry_after(), std::chrono::system_clock::now(), std::chrono::seconds(3600));
  }
  surge::proto::retry_policy policy;
  (void)surge::proto::decide(result, 3, std::chrono::seconds(10), policy, 0.5);

  surge::engine::prepare_for_body(parser, config);
  parser.eager(true);
  // The body in small pieces, as a trickling peer sends it.
  while (offset < size && !parser.is_done()) {
    const auto piece = std::min<std::size_t>(7, size - offset);
    const auto n = parser.put(boost::asio::buffer(data + offset, piece), ec);
    if (ec || n == 0) break;
    offset += n;
  }
  if (parser.body().size() > config.max_response_body) std::abort();
  return 0;
}
