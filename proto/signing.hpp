#pragma once
// Webhook signing: the `vvv` scheme, Standard Webhooks 1.0, and `stored`: a signature the
// producer computed at enqueue and stored with the row (the second published queue shape), sent
// as it is on every attempt.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "proto/hmac_sha256.hpp"

namespace surge::proto {

enum class signing_scheme { vvv, standard, stored };

std::optional<signing_scheme> parse_signing_scheme(std::string_view text);
std::string_view to_string(signing_scheme scheme);

sha256_digest hmac_sha256(std::string_view key, std::string_view message);
std::string to_lower_hex(std::span<const unsigned char> bytes);
std::string base64_encode(std::span<const unsigned char> bytes);
// Length of the padded base64 text of `bytes` bytes.
constexpr std::size_t base64_length(std::size_t bytes) { return (bytes + 2) / 3 * 4; }
// Standard base64 with padding; nullopt on any character outside the alphabet or bad padding.
std::optional<std::string> base64_decode(std::string_view text);

// What a secret typed by an operator must be (`surge subscriber add|set`); the drain accepts
// more, for rows other programs wrote. standard: every space-separated key is `whsec_<base64>`
// of 24 to 64 bytes, as the Standard Webhooks spec asks; a bare or short key is almost always a
// pasted vvv secret that receivers' libraries would read differently. Empty if fine.
std::string problem_with_new_secret(signing_scheme scheme, std::string_view secret);

// `stored`: the row's stored signature must be exactly 64 lowercase hex characters, the hex of
// an HMAC-SHA256, or it is not sent. Empty if it is; otherwise why not, never quoting the value
// (another program wrote it, and it may hold anything).
std::string stored_signature_problem(std::string_view stored);
// What a producer of such a queue stores at enqueue: lowercase hex HMAC-SHA256(secret, payload).
std::string stored_signature_for(std::string_view secret, std::string_view payload);

// Header fields a signed request carries: 2 for vvv, 3 for standard, 1 for stored. The values are
// kept in the object itself, so signing a request allocates nothing; only a secret with more
// rotated keys than fit (about four) spills them to the heap.
class signed_fields {
 public:
  std::size_t size() const { return count_; }
  std::string_view name(std::size_t index) const { return fields_[index].name; }
  std::string_view value(std::size_t index) const {
    return text().substr(fields_[index].offset, fields_[index].length);
  }

 private:
  friend class signer;
  struct field {
    std::string_view name;
    std::size_t offset = 0;
    std::size_t length = 0;
  };

  // A value is written in pieces between open() and close().
  void open(std::string_view name);
  void append(std::string_view piece);
  void close();
  std::string_view text() const;

  std::array<field, 3> fields_{};
  std::size_t count_ = 0;
  std::array<char, 240> inline_text_{};
  std::size_t inline_used_ = 0;
  std::string spilled_text_;
  bool spilled_ = false;
};

// Holds one subscriber's keys, decoded and keyed into SHA-256 states, so that signing a request
// does no parsing and allocates nothing.
class signer {
 public:
  // vvv: the secret is the raw HMAC key. standard: one or more space-separated `whsec_<base64>`
  // secrets (key rotation); each produces one `v1,` signature. stored: the secret is not used to
  // send (the producer signed with it at enqueue). Returns nullopt and sets `error` when the
  // secret cannot be used with the scheme.
  static std::optional<signer> create(signing_scheme scheme, std::string_view secret,
                                      std::string* error = nullptr);

  signing_scheme scheme() const { return scheme_; }

  // vvv: X-VVV-Timestamp, X-VVV-Signature ("sha256=<hex>" over "<ts>.<payload>").
  // standard: webhook-id, webhook-timestamp, webhook-signature ("v1,<b64>" over
  // "<id>.<ts>.<payload>", several separated by one space).
  // stored: X-VVV-Signature, the row's `stored` signature verbatim, never recomputed; throws
  // std::invalid_argument when stored_signature_problem() finds one (callers refuse such rows
  // before they take a token, so this is the last line of defence).
  signed_fields sign(std::string_view message_id, std::int64_t unix_seconds,
                     std::string_view payload, std::string_view stored = {}) const;

 private:
  signer() = default;  // only create() makes one: a signer without keys cannot sign

  // The secret's keys, each keyed into SHA-256 states once (signing.cpp), shared by copies.
  struct keyed_secret;

  signing_scheme scheme_ = signing_scheme::vvv;
  std::shared_ptr<const keyed_secret> keys_;
};

// Constant-time verification, as a receiver does it. `signature_header` is the received header
// value. verify_standard accepts when any `v1,` entry matches any of the secret's keys.
bool verify_vvv(std::string_view secret, std::string_view timestamp, std::string_view payload,
                std::string_view signature_header);
bool verify_standard(std::string_view secret, std::string_view message_id,
                     std::string_view timestamp, std::string_view payload,
                     std::string_view signature_header);
// stored: the header is the lowercase hex HMAC-SHA256(secret, payload), nothing else.
bool verify_stored(std::string_view secret, std::string_view payload,
                   std::string_view signature_header);

// A fresh random secret: 32 random bytes, hex for vvv and stored, `whsec_<base64>` for standard.
std::string generate_secret(signing_scheme scheme);

}  // namespace surge::proto
