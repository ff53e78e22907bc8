#include "tools/sink/verdict.hpp"

#include "proto/signing.hpp"

namespace surge::sink {

std::string_view to_string(verdict value) {
  switch (value) {
    case verdict::ok: return "ok";
    case verdict::bad: return "bad";
    case verdict::missing: return "missing";
    case verdict::unknown_subscriber: return "unknown_subscriber";
    case verdict::too_large: return "too_large";
  }
  return "bad";
}

verdict judge(const subscriber_key* subscriber, const signature_headers& headers,
              std::string_view body) {
  if (subscriber == nullptr) return verdict::unknown_subscriber;
  const auto configured =
      proto::parse_signing_scheme(subscriber->signing).value_or(proto::signing_scheme::vvv);
  if (headers.standard_signature) {
    if (configured != proto::signing_scheme::standard || !headers.standard_id ||
        !headers.standard_timestamp)
      return verdict::bad;
    return proto::verify_standard(subscriber->secret, *headers.standard_id,
                                  *headers.standard_timestamp, body, *headers.standard_signature)
               ? verdict::ok
               : verdict::bad;
  }
  if (headers.vvv_signature && configured == proto::signing_scheme::stored) {
    // Signed once at enqueue over the payload alone: no timestamp.
    return proto::verify_stored(subscriber->secret, body, *headers.vvv_signature) ? verdict::ok
                                                                                  : verdict::bad;
  }
  if (headers.vvv_signature) {
    if (configured != proto::signing_scheme::vvv || !headers.vvv_timestamp) return verdict::bad;
    return proto::verify_vvv(subscriber->secret, *headers.vvv_timestamp, body,
                             *headers.vvv_signature)
               ? verdict::ok
               : verdict::bad;
  }
  return verdict::missing;
}

std::optional<std::string_view> signed_timestamp(const signature_headers& headers) {
  if (headers.standard_signature) return headers.standard_timestamp;
  if (headers.vvv_signature) return headers.vvv_timestamp;
  return std::nullopt;
}

}  // namespace surge::sink
