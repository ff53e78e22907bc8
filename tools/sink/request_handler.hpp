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
  response_type response;  // only meaningful for kind::respond
};

// The subscriber id is the last path segment, so any prefix (/hook/3, /a/b/3) works.
std::string_view subscriber_segment(std::string_view target);

class request_handler {
 public:
  request_handler(subscriber_directory& subscribers, responder& behaviours, recorder& records)
      : subscribers_(subscribers), behaviours_(behaviours), records_(records) {}

  // `arrival` is when the request was read whole, in Unix seconds.
  reply handle(const request_type& request, std::uint64_t connection_id, double arrival);

  // The body exceeded the limit: 413 and close, recorded as too_large (nothing to verify).
  reply too_large(const http::request_header<>& header, std::uint64_t connection_id,
                  double arrival);

 private:
  reply webhook(const request_type& request, std::uint64_t connection_id, double arrival);
  request_record describe(const http::request_header<>& header, std::uint64_t connection_id,
                          double arrival) const;

  subscriber_directory& subscribers_;
  responder& behaviours_;
  recorder& records_;
};

}  // namespace surge::sink
