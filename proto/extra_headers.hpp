#pragma once
// Extra request headers an operator sets per subscriber (an API key, `Authorization: Bearer …`)
// for partners behind a gateway that wants more than a signature. They go out after the headers
// Surge writes itself and may never replace or duplicate one of them: a partner must be able to
// trust that the signature, the body's framing and the host it sees are Surge's own.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace surge::proto {

struct header_field {
  std::string name;
  std::string value;
  bool operator==(const header_field&) const = default;
};

// Why `name` cannot be an extra header's name, or empty when it can. Refused: anything that is
// not an RFC 9110 token, the names Surge writes on every request (Host, User-Agent, the X-VVV-*
// and webhook-* families of both signing schemes and the batch headers), every Content-* field
// (Content-Type and Content-Length are Surge's; Content-Encoding and the rest would change how
// the signed body is read), the fields that carry a body digest or a signature (Digest,
// Repr-Digest, Signature, Signature-Input), and the hop-by-hop and framing fields (Connection,
// Transfer-Encoding, Keep-Alive, TE, Trailer, Upgrade, Expect, Proxy-Connection) that would
// change how the request is read. Case-insensitive, as field names are.
std::string extra_header_name_problem(std::string_view name);

// The longest value an extra header may have. Partners' servers refuse longer header lines
// (nginx answers 400 past its 8 KiB large_client_header_buffers), so a longer value would be
// stored, then fail every attempt; it is refused when set instead.
inline constexpr std::size_t max_extra_header_value_bytes = 8 * 1024;

// The same for a whole field: the name's rule, then the value's (proto/header_value.hpp) and its
// size, as "header 'Name': problem"; empty when it may be sent.
std::string extra_header_problem(const header_field& field);

// "Name: value" as given on a command line (optional whitespace around the value trimmed), or
// an error in `error`.
header_field parse_header_line(std::string_view line, std::string* error);

// The stored form: one "Name: value" line per field, joined by LF. Values cannot hold CR or LF
// (the value rule refuses them), so the encoding is unambiguous for whatever was checked.
std::string encode_header_fields(const std::vector<header_field>& fields);
// Lines that are empty are skipped; a line without ':' becomes a field with an empty name,
// which extra_header_problem then refuses, so another program's bad write is reported, not
// silently dropped.
std::vector<header_field> decode_header_fields(std::string_view text);

// Case-insensitive comparison of field names.
bool same_header_name(std::string_view a, std::string_view b);

}  // namespace surge::proto
