#pragma once
// What may reach an HTTP/1.1 request line or header field. Values from the
// queue (event types, anything a producer wrote) and from subscriber URLs pass through here
// before a request is built, so a CR/LF can never end a field early and start another field, or
// a whole second request, on a partner's connection.
//
// The rule, stricter than RFC 9110 section 5.5's field-value grammar:
// - a header field value holds only visible ASCII (0x21-0x7E), SP and HTAB: no CR, LF, NUL,
//   DEL or other control, and no byte above 0x7E (obs-text, which recipients may treat as
//   opaque and some refuse);
// - a request target (origin-form, RFC 9112 section 3.2.1) holds only visible ASCII and starts
//   with '/': a space would end the request target early.
#include <string_view>

namespace surge::proto {

// Why `value` cannot be a header field value ("contains CR/LF", ...), or empty when it can.
std::string_view header_value_problem(std::string_view value);

// Why `target` cannot be an origin-form request target, or empty when it can.
std::string_view request_target_problem(std::string_view target);

inline bool is_safe_header_value(std::string_view value) {
  return header_value_problem(value).empty();
}

}  // namespace surge::proto
