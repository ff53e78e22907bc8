#include "proto/signing.hpp"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <tuple>
#include <vector>

namespace surge::proto {
namespace {

constexpr std::string_view whsec_prefix = "whsec_";
constexpr std::string_view vvv_prefix = "sha256=";
constexpr std::string_view v1_prefix = "v1,";
constexpr std::string_view b64_alphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

sha256_digest hmac_parts(std::string_view key, std::initializer_list<std::string_view> parts) {
  return hmac_sha256_key(key).mac(parts);
}

bool equal_digest(const sha256_digest& expected, std::string_view received) {
  return received.size() == expected.size() &&
         CRYPTO_memcmp(expected.data(), received.data(), expected.size()) == 0;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> hex_decode(std::string_view text) {
  if (text.size() % 2 != 0) return std::nullopt;
  std::string out(text.size() / 2, '\0');
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int hi = hex_value(text[2 * i]);
    const int lo = hex_value(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<char>(hi * 16 + lo);
  }
  return out;
}

// Splits on spaces, skipping empty pieces, so doubled separators are harmless.
template <typename F>
void for_each_token(std::string_view text, F&& f) {
  while (!text.empty()) {
    const std::size_t end = std::min(text.find(' '), text.size());
    if (end > 0) f(text.substr(0, end));
    text.remove_prefix(std::min(end + 1, text.size()));
  }
}

// Standard Webhooks libraries accept a bare base64 secret as well as `whsec_<base64>`.
std::optional<std::vector<std::string>> standard_keys(std::string_view secret, std::string* error) {
  std::vector<std::string> keys;
  bool bad = false;
  for_each_token(secret, [&](std::string_view token) {
    if (bad) return;
    if (token.starts_with(whsec_prefix)) token.remove_prefix(whsec_prefix.size());
    auto key = base64_decode(token);
    if (!key || key->empty()) {
      bad = true;
      if (error) {
        *error = "secret " + std::to_string(keys.size() + 1) + " is not whsec_<base64>";
      }
      return;
    }
    keys.push_back(std::move(*key));
  });
  if (bad) return std::nullopt;
  if (keys.empty()) {
    if (error) *error = "empty secret";
    return std::nullopt;
  }
  return keys;
}

// Writers into a buffer the caller sized, so the per-request path can keep the text on the
// stack.
void write_lower_hex(std::span<const unsigned char> bytes, char* out) {
  constexpr std::string_view digits = "0123456789abcdef";
  for (unsigned char b : bytes) {
    *out++ = digits[b >> 4];
    *out++ = digits[b & 0x0f];
  }
}

void write_base64(std::span<const unsigned char> bytes, char* out) {
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const unsigned v = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
    *out++ = b64_alphabet[(v >> 18) & 63];
    *out++ = b64_alphabet[(v >> 12) & 63];
    *out++ = b64_alphabet[(v >> 6) & 63];
    *out++ = b64_alphabet[v & 63];
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    const unsigned v = (bytes[i] << 16) | (rest == 2 ? bytes[i + 1] << 8 : 0u);
    *out++ = b64_alphabet[(v >> 18) & 63];
    *out++ = b64_alphabet[(v >> 12) & 63];
    *out++ = rest == 2 ? b64_alphabet[(v >> 6) & 63] : '=';
    *out++ = '=';
  }
}

}  // namespace

struct signer::keyed_secret {
  std::vector<hmac_sha256_key> keys;
};

std::optional<signing_scheme> parse_signing_scheme(std::string_view text) {
  auto same = [](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      const char c = (a[i] >= 'A' && a[i] <= 'Z') ? static_cast<char>(a[i] - 'A' + 'a') : a[i];
      if (c != b[i]) return false;
    }
    return true;
  };
  if (same(text, "vvv")) return signing_scheme::vvv;
  if (same(text, "standard")) return signing_scheme::standard;
  if (same(text, "stored")) return signing_scheme::stored;
  return std::nullopt;
}

std::string_view to_string(signing_scheme scheme) {
  switch (scheme) {
    case signing_scheme::standard: return "standard";
    case signing_scheme::stored: return "stored";
    case signing_scheme::vvv: break;
  }
  return "vvv";
}

std::string stored_signature_problem(std::string_view stored) {
  if (stored.empty()) return "missing stored signature";
  constexpr std::size_t hex_digits = 2 * std::tuple_size_v<sha256_digest>;
  const bool lower_hex = std::all_of(stored.begin(), stored.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
  if (stored.size() == hex_digits && lower_hex) return {};
  return "stored signature is not " + std::to_string(hex_digits) + " lowercase hex characters (" +
         std::to_string(stored.size()) + " characters" +
         (lower_hex ? ")" : ", not all lowercase hex)");
}

std::string stored_signature_for(std::string_view secret, std::string_view payload) {
  return to_lower_hex(hmac_sha256(secret, payload));
}

sha256_digest hmac_sha256(std::string_view key, std::string_view message) {
  return hmac_parts(key, {message});
}

std::string to_lower_hex(std::span<const unsigned char> bytes) {
  std::string out(bytes.size() * 2, '\0');
  write_lower_hex(bytes, out.data());
  return out;
}

std::string base64_encode(std::span<const unsigned char> bytes) {
  std::string out(base64_length(bytes.size()), '\0');
  write_base64(bytes, out.data());
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::size_t padding = 0;
  if (!text.empty() && text.back() == '=') ++padding;
  if (text.size() >= 2 && text[text.size() - 2] == '=') ++padding;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  unsigned acc = 0;
  for (std::size_t i = 0; i < text.size() - padding; ++i) {
    const std::size_t v = b64_alphabet.find(text[i]);
    if (v == std::string_view::npos) return std::nullopt;  // also a '=' before the end
    acc = (acc << 6) | static_cast<unsigned>(v);
    if (i % 4 == 3) {
      out.push_back(static_cast<char>((acc >> 16) & 0xff));
      out.push_back(static_cast<char>((acc >> 8) & 0xff));
      out.push_back(static_cast<char>(acc & 0xff));
      acc = 0;
    }
  }
  // Unused low bits of the last group are ignored, as most decoders do, so secrets written by
  // lenient encoders still work.
  if (padding == 1) {
    out.push_back(static_cast<char>((acc >> 10) & 0xff));
    out.push_back(static_cast<char>((acc >> 2) & 0xff));
  } else if (padding == 2) {
    out.push_back(static_cast<char>((acc >> 4) & 0xff));
  }
  return out;
}

std::optional<signer> signer::create(signing_scheme scheme, std::string_view secret,
                                     std::string* error) {
  signer made;
  made.scheme_ = scheme;
  auto keyed = std::make_shared<keyed_secret>();
  if (scheme == signing_scheme::stored) {
    // The producer signed every row at enqueue; sending needs no key.
    made.keys_ = std::move(keyed);
    return made;
  }
  if (scheme == signing_scheme::vvv) {
    // An empty HMAC key is accepted by OpenSSL but authenticates nothing.
    if (secret.empty()) {
      if (error) *error = "empty secret";
      return std::nullopt;
    }
    keyed->keys.emplace_back(secret);
  } else {
    auto keys = standard_keys(secret, error);
    if (!keys) return std::nullopt;
    keyed->keys.reserve(keys->size());
    for (const std::string& key : *keys) keyed->keys.emplace_back(key);
    for (std::string& key : *keys) OPENSSL_cleanse(key.data(), key.size());
  }
  made.keys_ = std::move(keyed);
  return made;
}

void signed_fields::open(std::string_view name) {
  fields_[count_] = {.name = name, .offset = text().size(), .length = 0};
}

void signed_fields::append(std::string_view piece) {
  if (!spilled_ && inline_used_ + piece.size() <= inline_text_.size()) {
    std::copy(piece.begin(), piece.end(), inline_text_.begin() + inline_used_);
    inline_used_ += piece.size();
    return;
  }
  if (!spilled_) {
    spilled_text_.assign(inline_text_.data(), inline_used_);
    spilled_ = true;
  }
  spilled_text_ += piece;
}

void signed_fields::close() {
  fields_[count_].length = text().size() - fields_[count_].offset;
  ++count_;
}

std::string_view signed_fields::text() const {
  return spilled_ ? std::string_view(spilled_text_)
                  : std::string_view(inline_text_.data(), inline_used_);
}

signed_fields signer::sign(std::string_view message_id, std::int64_t unix_seconds,
                           std::string_view payload, std::string_view stored) const {
  signed_fields out;
  if (scheme_ == signing_scheme::stored) {
    if (const auto problem = stored_signature_problem(stored); !problem.empty()) {
      throw std::invalid_argument(problem);
    }
    out.open("X-VVV-Signature");
    out.append(stored);
    out.close();
    return out;
  }
  std::array<char, 24> timestamp_digits{};
  const auto written = std::to_chars(
      timestamp_digits.data(), timestamp_digits.data() + timestamp_digits.size(), unix_seconds);
  const std::string_view timestamp(timestamp_digits.data(),
                                   static_cast<std::size_t>(written.ptr - timestamp_digits.data()));
  if (scheme_ == signing_scheme::vvv) {
    const auto mac = keys_->keys.front().mac({timestamp, ".", payload});
    out.open("X-VVV-Timestamp");
    out.append(timestamp);
    out.close();
    out.open("X-VVV-Signature");
    out.append(vvv_prefix);
    std::array<char, 2 * std::tuple_size_v<sha256_digest>> hex{};
    write_lower_hex(mac, hex.data());
    out.append({hex.data(), hex.size()});
    out.close();
    return out;
  }
  out.open("webhook-id");
  out.append(message_id);
  out.close();
  out.open("webhook-timestamp");
  out.append(timestamp);
  out.close();
  out.open("webhook-signature");
  bool first = true;
  for (const hmac_sha256_key& key : keys_->keys) {
    if (!first) out.append(" ");
    first = false;
    out.append(v1_prefix);
    std::array<char, base64_length(std::tuple_size_v<sha256_digest>)> encoded{};
    write_base64(key.mac({message_id, ".", timestamp, ".", payload}), encoded.data());
    out.append({encoded.data(), encoded.size()});
  }
  out.close();
  return out;
}

bool verify_vvv(std::string_view secret, std::string_view timestamp, std::string_view payload,
                std::string_view signature_header) {
  if (secret.empty() || !signature_header.starts_with(vvv_prefix)) return false;
  const auto received = hex_decode(signature_header.substr(vvv_prefix.size()));
  if (!received) return false;
  return equal_digest(hmac_parts(secret, {timestamp, ".", payload}), *received);
}

bool verify_standard(std::string_view secret, std::string_view message_id,
                     std::string_view timestamp, std::string_view payload,
                     std::string_view signature_header) {
  const auto keys = standard_keys(secret, nullptr);
  if (!keys) return false;
  std::vector<sha256_digest> expected;
  expected.reserve(keys->size());
  for (const std::string& key : *keys) {
    expected.push_back(hmac_parts(key, {message_id, ".", timestamp, ".", payload}));
  }
  bool matched = false;
  for_each_token(signature_header, [&](std::string_view entry) {
    // Entries of other versions are skipped so that future schemes can be sent alongside v1.
    if (matched || !entry.starts_with(v1_prefix)) return;
    const auto received = base64_decode(entry.substr(v1_prefix.size()));
    if (!received) return;
    for (const auto& digest : expected) matched = matched || equal_digest(digest, *received);
  });
  return matched;
}

bool verify_stored(std::string_view secret, std::string_view payload,
                   std::string_view signature_header) {
  // Only the exact form a producer stores: 64 lowercase hex characters, nothing around them.
  if (secret.empty() || !stored_signature_problem(signature_header).empty()) return false;
  const auto received = hex_decode(signature_header);
  return received && equal_digest(hmac_sha256(secret, payload), *received);
}

std::string problem_with_new_secret(signing_scheme scheme, std::string_view secret) {
  std::string error;
  // A stored-signature queue's producer signs with the secret: empty, it authenticates nothing.
  if (scheme == signing_scheme::stored) return secret.empty() ? "empty secret" : "";
  if (!signer::create(scheme, secret, &error)) return error;
  if (scheme == signing_scheme::vvv) return {};
  std::string problem;
  int index = 0;
  for_each_token(secret, [&](std::string_view token) {
    ++index;
    if (!problem.empty()) return;
    const auto key = token.starts_with(whsec_prefix)
                         ? base64_decode(token.substr(whsec_prefix.size()))
                         : std::nullopt;
    if (!key || key->size() < 24 || key->size() > 64) {
      problem = "secret " + std::to_string(index) + " is not whsec_<base64 of 24 to 64 bytes>";
    }
  });
  return problem;
}

std::string generate_secret(signing_scheme scheme) {
  std::array<unsigned char, 32> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    throw std::runtime_error("RAND_bytes failed: no secure randomness available");
  }
  if (scheme == signing_scheme::standard) return std::string(whsec_prefix) + base64_encode(bytes);
  return to_lower_hex(bytes);
}

}  // namespace surge::proto
