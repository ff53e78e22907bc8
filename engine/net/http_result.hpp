#pragma once
// What one HTTP exchange came to, as the client hands it back: plain data, so the shard's core
// judges it without I/O.
#include <chrono>
#include <string>

#include "engine/net/quota_lines.hpp"
#include "proto/outcome.hpp"

namespace surge::engine {

struct http_result {
  int status = 0;  // 0 when the attempt failed before a whole response header arrived
  proto::transport_error error = proto::transport_error::none;
  std::string detail;       // error text or the refused address, for last_error
  std::string retry_after;  // raw header value, empty when absent
  quota_lines quota;        // the partner's quota fields, empty when it announced none
  std::string body_prefix;  // at most max_response_body bytes
  bool reused_connection = false;
  bool fresh_retry = false;  // the first try failed on a stale keep-alive connection
  bool not_sent = false;     // the write gate gave up: nothing of this attempt went out
  // No file descriptor was free for its connection (EMFILE, ENFILE) and no idle one could be
  // closed for it: nothing went out, and the partner had no part in it.
  bool out_of_descriptors = false;
  // From the request's first byte to the end of the response (or the failure): the endpoint's
  // latency without DNS, connect or TLS handshake. Zero when no connection was ever open.
  std::chrono::steady_clock::duration exchange_time{};
};

}  // namespace surge::engine
