#pragma once
// How a webhook response is parsed: shared by the HTTP client and the response fuzzer, so the
// fuzzer exercises exactly the limits production uses.
//
// Beast's basic_parser does the parsing (status line, field syntax, Content-Length and chunked
// framing, keep-alive, the header and body limits); this parser keeps only what an attempt uses:
// the status, the first Retry-After, the partner's quota fields (engine/net/quota_lines.hpp) and at
// most a prefix of the body. No other header field is stored, so a response without Retry-After,
// quota fields or body allocates nothing (a Beast response_parser allocates a node for every
// field of every response). Fields Beast knows by name are never quota fields, so only unknown
// names are compared.
#include <cstddef>
#include <cstdint>
#include <string>

#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/optional/optional.hpp>

#include "engine/config.hpp"
#include "engine/net/quota_lines.hpp"

namespace surge::engine {

class response_parser : public boost::beast::http::basic_parser<false> {
 public:
  int status() const { return status_; }
  // The first Retry-After's value; empty when none came.
  const std::string& retry_after() const { return retry_after_; }
  // The quota fields' lines, in the order they came.
  quota_lines& quota() { return quota_; }
  // What was kept of the body: at most body_cap bytes.
  const std::string& body() const { return body_; }
  void body_cap(std::size_t bytes) { body_cap_ = bytes; }

 private:
  using string_view = boost::beast::string_view;
  using error_code = boost::beast::error_code;

  void on_request_impl(boost::beast::http::verb, string_view, string_view, int,
                       error_code&) override {}  // never called: this parses responses
  void on_response_impl(int code, string_view, int, error_code&) override { status_ = code; }
  void on_field_impl(boost::beast::http::field name, string_view name_text, string_view value,
                     error_code&) override {
    if (name == boost::beast::http::field::retry_after && !has_retry_after_) {
      retry_after_.assign(value.data(), value.size());
      has_retry_after_ = true;
    } else if (name == boost::beast::http::field::unknown && quota_.size() < max_quota_lines) {
      if (const auto field = proto::quota_field_named({name_text.data(), name_text.size()})) {
        quota_.push_back({*field, std::string(value.data(), value.size())});
      }
    }
  }
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>&, error_code&) override {}
  std::size_t on_body_impl(string_view body, error_code&) override {
    keep(body);
    return body.size();
  }
  void on_chunk_header_impl(std::uint64_t, string_view, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, string_view body, error_code&) override {
    keep(body);
    return body.size();
  }
  void on_finish_impl(error_code&) override {}

  void keep(string_view piece) {
    if (body_.size() >= body_cap_) return;
    const auto room = body_cap_ - body_.size();
    body_.append(piece.data(), piece.size() < room ? piece.size() : room);
  }

  int status_ = 0;
  bool has_retry_after_ = false;
  std::string retry_after_;
  quota_lines quota_;
  std::string body_;
  std::size_t body_cap_ = 0;
};

// No body limit while reading the header: Beast would reject a large Content-Length before we
// learn the status.
inline void prepare_for_header(response_parser& parser, const http_client_config& config) {
  parser.header_limit(static_cast<std::uint32_t>(config.max_response_header));
  parser.body_limit(boost::none);
}

// Only a small prefix of the body is read: it is kept for diagnostics, nothing more.
inline void prepare_for_body(response_parser& parser, const http_client_config& config) {
  parser.body_limit(config.max_response_body);
  parser.body_cap(config.max_response_body);
}

}  // namespace surge::engine
