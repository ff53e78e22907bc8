#pragma once
// The quota header lines of a response (RateLimit-Policy, RateLimit, X-RateLimit-*), copied out
// of the connection's buffer as the parser meets them: the buffer is reused by the next response
// long before the attempt's outcome is settled. Empty, and unallocated, for a partner that
// announces nothing.
#include <string>
#include <vector>

#include "proto/rate_limit_headers.hpp"

namespace surge::engine {

struct quota_line {
  proto::quota_field field = proto::quota_field::ratelimit;
  std::string value;
};

using quota_lines = std::vector<quota_line>;

// More lines than every field's limit together (proto::quota_fields::max_lines each, plus one
// to tell it overflowed) are not kept: the parse ignores such a field anyway.
inline constexpr std::size_t max_quota_lines =
    proto::quota_field_count * (proto::quota_fields::max_lines + 1);

// The lines as proto::parse_announced_quota reads them; views into `lines`.
inline proto::quota_fields to_quota_fields(const quota_lines& lines) {
  proto::quota_fields fields;
  for (const auto& line : lines) fields.add(line.field, line.value);
  return fields;
}

}  // namespace surge::engine
