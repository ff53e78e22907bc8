#include "proto/ordered_delivery.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <openssl/evp.h>

#include "proto/coalesce.hpp"

namespace surge::proto {

std::string order_pointer_problem(std::string_view pointer) {
  // RFC 6901 as coalescing reads it; only the empty pointer means something here.
  return pointer.empty() ? std::string() : coalesce_pointer_problem(pointer);
}

std::string order_key(std::string_view pointer, std::string_view payload) {
  if (pointer.empty()) return {};
  boost::system::error_code ec;
  // Deeper than Boost.JSON's default of 32 levels, so a deeply nested event is not taken for
  // one without the key; a payload is at most 1 MiB.
  boost::json::parse_options options;
  options.max_depth = 4096;
  const auto parsed = boost::json::parse(payload, ec, {}, options);
  if (ec) return {};
  const auto* found = parsed.find_pointer(pointer, ec);
  if (ec || found == nullptr) return {};
  auto key = boost::json::serialize(*found);
  if (key.size() <= max_order_key_bytes) return key;
  // A long value (an object, a long string) stands for itself by its digest: keys are only
  // compared, and a stopped key is stored, shown and logged.
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(key.data(), key.size(), digest, &length, EVP_sha256(), nullptr);
  static constexpr char hex[] = "0123456789abcdef";
  std::string named = "sha256:";
  for (unsigned int i = 0; i < length; ++i) {
    named += hex[digest[i] >> 4];
    named += hex[digest[i] & 0xf];
  }
  return named;
}

bool key_heads::consider(const std::string& key, bool due, bool free) {
  const auto [seen, first] = seen_.try_emplace(key);
  if (!free) {
    seen->second.leased = true;
  } else if (!first && due && seen->second.leased) {
    held_behind_flight_ = true;
  }
  // Only the first row of a key can go; every later one waits for it, whatever its state.
  return first && due && free && !stopped_keys_.contains(key);
}

bool key_heads::may_go(const std::string& key) const {
  const auto seen = seen_.find(key);
  return seen != seen_.end() && !seen->second.leased;
}

std::string_view dead_key_name(dead_key rule) { return rule == dead_key::stops ? "stop" : "skip"; }

bool parse_dead_key(std::string_view text, dead_key& rule) {
  if (text == "skip") {
    rule = dead_key::moves_on;
  } else if (text == "stop") {
    rule = dead_key::stops;
  } else {
    return false;
  }
  return true;
}

}  // namespace surge::proto
