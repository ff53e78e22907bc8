#pragma once
// What the sink concludes about one request's signature, kept free of I/O so
// it can be tested without sockets.
#include <optional>
#include <string>
#include <string_view>

namespace surge::sink {

// too_large: the body exceeded the limit, so the signature could not be checked at all.
enum class verdict { ok, bad, missing, unknown_subscriber, too_large };

inline constexpr verdict all_verdicts[] = {verdict::ok, verdict::bad, verdict::missing,
                                           verdict::unknown_subscriber, verdict::too_large};

std::string_view to_string(verdict value);

// The signing headers as received; absent headers are nullopt (an empty value is still present).
struct signature_headers {
  std::optional<std::string_view> standard_signature, standard_id, standard_timestamp;
  std::optional<std::string_view> vvv_signature, vvv_timestamp;
};

struct subscriber_key {
  std::string secret;
  std::string signing;  // the subscriber's `signing` column: "vvv" or "standard"
};

// `webhook-signature` selects the standard scheme, otherwise `X-VVV-Signature`; neither present
// is `missing`. A scheme other than the subscriber's configured one is `bad`: the partner would
// reject it too.
verdict judge(const subscriber_key* subscriber, const signature_headers& headers,
              std::string_view body);

// The timestamp the request was signed with, whichever scheme it used.
std::optional<std::string_view> signed_timestamp(const signature_headers& headers);

}  // namespace surge::sink
