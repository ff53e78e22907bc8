#pragma once
// How a webhook response is parsed: shared by the HTTP client and the response fuzzer, so the
// fuzzer exercises exactly the limits production uses.
#include <cstdint>

#include <boost/beast/http/dynamic_body.hpp>
#include <boost/beast/http/parser.hpp>

#include "engine/config.hpp"

namespace surge::engine {

using response_parser = boost::beast::http::response_parser<boost::beast::http::dynamic_body>;

// No body limit while reading the header: Beast would reject a large Content-Length before we
// learn the status. dynamic_body never reserves the announced length, so a hostile
// Content-Length costs no memory.
inline void prepare_for_header(response_parser& parser, const http_client_config& config) {
  parser.header_limit(static_cast<std::uint32_t>(config.max_response_header));
  parser.body_limit(boost::none);
}

// Only a small prefix of the body is read: it is kept for diagnostics, nothing more.
inline void prepare_for_body(response_parser& parser, const http_client_config& config) {
  parser.body_limit(config.max_response_body);
}

}  // namespace surge::engine
