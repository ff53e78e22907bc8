#pragma once
// Reads one final response out of the bytes a connection delivers, without doing I/O itself:
// the HTTP client feeds it what each read returns, the fuzzer feeds it chunks of its input. So
// the rules that match a response to its request are tested without sockets:
// - interim 1xx responses are skipped (RFC 9110 section 15.2); a fresh parser reads the next
//   response from the same buffer; at most max_interim_responses of them, and all their headers
//   together stay within the header limit;
// - 101 Switching Protocols is not an answer to a POST: a protocol error;
// - only a final status is ever reported, and only bytes of this response are consumed: what
//   follows stays in the buffer, and the connection is not reused (response_end::bytes_left).
#include <optional>
#include <string>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/system/error_code.hpp>

#include "engine/config.hpp"
#include "engine/net/connection_state.hpp"
#include "engine/net/response_parser.hpp"
#include "proto/outcome.hpp"

namespace surge::engine {

inline constexpr int max_interim_responses = 16;

class response_reader {
 public:
  enum class progress { need_more, done };

  explicit response_reader(const http_client_config& config);

  // Parses what `buffer` holds and consumes the bytes that belong to this response.
  progress on_bytes(boost::beast::flat_buffer& buffer);
  // The stream ended (EOF) or a read failed before the response was done.
  void on_end(const boost::system::error_code& ec);
  // The attempt deadline passed before the response was done.
  void on_deadline();

  bool done() const { return finished_; }
  // The final status; 0 when none arrived (then error() says why).
  int status() const { return final_ ? status_ : 0; }
  proto::transport_error error() const { return error_; }
  // Why the attempt failed, or why the body was not read whole; empty otherwise.
  const std::string& detail() const { return detail_; }
  const std::string& retry_after() const { return retry_after_; }
  // The final response's quota fields (the partner's announced quota), moved out.
  quota_lines take_quota() { return std::move(quota_); }
  // At most max_response_body bytes of the final response's body.
  std::string body_prefix() const;
  int interim_responses() const { return interim_; }
  // Whether any response byte arrived (interim ones included).
  bool any_byte() const { return any_byte_; }
  // How the response ended, for the reuse decision; `buffer` is what the connection holds.
  response_end end(const boost::beast::flat_buffer& buffer) const;

 private:
  void start_parser();
  void on_header();
  void fail(proto::transport_error error, std::string detail);
  void finish(bool read_whole, std::string detail = {});

  const http_client_config& config_;
  std::optional<response_parser> parser_;
  bool in_body_ = false;
  bool finished_ = false;
  bool final_ = false;
  bool switching_ = false;
  bool read_whole_ = false;
  bool any_byte_ = false;
  int status_ = 0;
  int interim_ = 0;
  std::size_t header_bytes_ = 0;  // of the interim responses read so far
  proto::transport_error error_ = proto::transport_error::none;
  std::string detail_;
  std::string retry_after_;
  quota_lines quota_;
};

}  // namespace surge::engine
