#pragma once
// Turns one received request into the sink's reply: verdict, behaviour, record.
#include <chrono>
#include <cstdint>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "tools/sink/behaviour.hpp"
#include "tools/sink/recorder.hpp"
#include "tools/sink/subscriber_directory.hpp"

namespace surge::sink {

namespace http = boost::beast::http;

using request_type = http::request<http::string_body>;
using response_type = http::response<http::string_body>;

struct reply {
  action::kind what = action::kind::respond;
  std::chrono::milliseconds delay{0};
  response_type response;                          // only meaningful for kind::respond
  std::chrono::microseconds delay_per_request{0};  // times the requests being answered
  // Hostile shapes (behaviour.hpp): the server writes these itself instead of `response`'s body.
  std::chrono::milliseconds trickle{0};
  body_shape body = body_shape::normal;
  std::uint64_t body_length = 0;

  // How long the answer waits while `answering` requests (this one included) are being
  // answered by the sink.
  std::chrono::microseconds wait_while_answering(int answering) const {
    return delay + delay_per_request * answering;
  }
};

// The subscriber id is the last path segment, so any prefix (/hook/3, /a/b/3) works.
std::string_view subscriber_segment(std::string_view target);

// Lowercase hex SHA-256, recorded per request so tests can check a body arrived byte for byte.
std::string sha256_hex(std::string_view data);

class request_handler {
 public:
  request_handler(subscriber_directory& subscribers, responder& behaviours, recorder& records)
      : subscribers_(subscribers), behaviours_(behaviours), records_(records) {}

  // `arrival` is when the request was read whole, in Unix seconds; `sni` the TLS server name
  // the connection's client sent (empty for plain HTTP or none).
  reply handle(const request_type& request, std::uint64_t connection_id, double arrival,
               std::string_view sni = {});

  // The body exceeded the limit: 413 and close, recorded as too_large (nothing to verify).
  reply too_large(const http::request_header<>& header, std::uint64_t connection_id, double arrival,
                  std::string_view sni = {});

 private:
  reply webhook(const request_type& request, std::uint64_t connection_id, double arrival,
                std::string_view sni);
  request_record describe(const http::request_header<>& header, std::uint64_t connection_id,
                          double arrival, std::string_view sni) const;

  subscriber_directory& subscribers_;
  responder& behaviours_;
  recorder& records_;
};

}  // namespace surge::sink
