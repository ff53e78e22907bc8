#include "proto/extra_headers.hpp"

#include <array>
#include <cctype>

#include "proto/header_value.hpp"

namespace surge::proto {

namespace {

// RFC 9110 section 5.6.2: tchar.
bool is_tchar(char c) {
  const auto byte = static_cast<unsigned char>(c);
  if (std::isalnum(byte) != 0 && byte < 0x80) return true;
  constexpr std::string_view specials = "!#$%&'*+-.^_`|~";
  return specials.find(c) != std::string_view::npos;
}

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

bool starts_with_nocase(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && same_header_name(text.substr(0, prefix.size()), prefix);
}

constexpr std::array<std::string_view, 10> reserved_names = {
    "host", "user-agent", "transfer-encoding", "connection", "keep-alive",
    "te",   "trailer",    "upgrade",           "expect",     "proxy-connection"};

// Fields that state or protect what the body is: the partner checks the signature over the bytes
// it reads, so a Content-Encoding, a digest or a second signature scheme would change or
// contradict what was signed.
constexpr std::array<std::string_view, 4> body_integrity_names = {"digest", "repr-digest",
                                                                  "signature", "signature-input"};
constexpr std::string_view content_prefix = "content-";

// Surge's own families: X-VVV-Event, -Delivery-Id, -Delivery-Ids, -Subscriber, -Attempt,
// -Batch-Size, -Timestamp, -Signature (engine/delivery.cpp, proto/signing.cpp) and webhook-id,
// -timestamp, -signature (Standard Webhooks). The whole families are kept, so a name Surge adds
// later can never collide with one an operator stored.
constexpr std::array<std::string_view, 2> reserved_prefixes = {"x-vvv-", "webhook-"};

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

}  // namespace

bool same_header_name(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::string extra_header_name_problem(std::string_view name) {
  if (name.empty()) return "the name is empty";
  for (const char c : name) {
    if (!is_tchar(c)) return "the name is not an HTTP token (letters, digits and !#$%&'*+-.^_`|~)";
  }
  for (const auto reserved : reserved_names) {
    if (same_header_name(name, reserved)) {
      return "Surge sets " + std::string(name) +
             " itself (or it would change how the request "
             "is framed); it cannot be overridden";
    }
  }
  if (starts_with_nocase(name, content_prefix)) {
    return "Content-* fields describe the signed body (its type, length, encoding); Surge sets "
           "the ones it sends and no other may change how the partner reads the body";
  }
  for (const auto reserved : body_integrity_names) {
    if (same_header_name(name, reserved)) {
      return std::string(name) +
             " carries the body's digest or a signature; only Surge's signature headers may";
    }
  }
  for (const auto prefix : reserved_prefixes) {
    if (starts_with_nocase(name, prefix)) {
      return "names starting with " + std::string(prefix) +
             " belong to Surge's signature and delivery headers; they cannot be overridden";
    }
  }
  return {};
}

std::string extra_header_problem(const header_field& field) {
  if (auto problem = extra_header_name_problem(field.name); !problem.empty()) {
    return "header '" + field.name + "': " + problem;
  }
  if (const auto problem = header_value_problem(field.value); !problem.empty()) {
    return "header '" + field.name + "': the value " + std::string(problem);
  }
  if (field.value.size() > max_extra_header_value_bytes) {
    return "header '" + field.name + "': the value is " + std::to_string(field.value.size()) +
           " bytes; partners' servers refuse header lines this long, so at most " +
           std::to_string(max_extra_header_value_bytes) + " are sent";
  }
  return {};
}

header_field parse_header_line(std::string_view line, std::string* error) {
  const auto colon = line.find(':');
  if (colon == std::string_view::npos) {
    if (error != nullptr) *error = "expected 'Name: value'";
    return {};
  }
  header_field field{std::string(line.substr(0, colon)), std::string(trim(line.substr(colon + 1)))};
  if (error != nullptr) *error = extra_header_problem(field);
  return field;
}

std::string encode_header_fields(const std::vector<header_field>& fields) {
  std::string out;
  for (const auto& field : fields) {
    if (!out.empty()) out += '\n';
    out.append(field.name).append(": ").append(field.value);
  }
  return out;
}

std::vector<header_field> decode_header_fields(std::string_view text) {
  std::vector<header_field> out;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const auto line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (line.empty()) continue;
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) {
      out.push_back({"", std::string(line)});
      continue;
    }
    auto value = line.substr(colon + 1);
    if (value.starts_with(' ')) value.remove_prefix(1);
    out.push_back({std::string(line.substr(0, colon)), std::string(value)});
  }
  return out;
}

}  // namespace surge::proto
