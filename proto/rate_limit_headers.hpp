#pragma once
// The quota a partner announces in its responses (DESIGN section 3, "The partner's own
// announcement counts"), read from either form:
// - the IETF draft (draft-ietf-httpapi-ratelimit-headers-11): `RateLimit-Policy: "day";q=5000;
//   w=86400` names a policy of q units per w seconds, `RateLimit: "day";r=100;t=36000` says r
//   units are left for the next t seconds. Both are Structured Field Lists (RFC 9651);
// - the older `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset`.
// Pure: no I/O, no clock reads; the caller passes `now` and the header values it found.
//
// The draft form, as read here:
// - a field is parsed as an RFC 9651 List; one that does not parse is ignored as a whole (every
//   line of it: the draft's "malformed fields MUST be ignored"), and so is one of more than 32
//   members. Each field line is parsed on its own and their members joined, which is what
//   combining the lines with commas gives, except that an empty line adds nothing;
// - a member that parses but does not mean what the draft says is dropped and the others kept:
//   an inner list, a name that is neither a String nor a Token, q or r missing or not a
//   non-negative Integer, w not a positive Integer, t not a non-negative Integer, qu not a
//   String. The draft wants a String name; a Token (`burst;q=100`) is accepted too, as its
//   working group weighed switching to Tokens and reading more can only slow Surge down. pk and
//   unknown parameters are comments here; a repeated parameter keeps its last value (RFC 9651);
// - a RateLimit item names its policy. Without t it takes its policy's w as the time left (the
//   units left cannot outlast the window they belong to); with neither it is skipped, as it says
//   nothing a pace could be drawn from;
// - a RateLimit-Policy item that no RateLimit item names is read as a full window starting now:
//   q units over w seconds. A policy without w is then skipped;
// - a policy whose qu is not "requests" counts bytes or concurrency, not requests: it and the
//   RateLimit items naming it are skipped;
// - among what is left, the one that constrains most wins: the fewest units left per second
//   until the reset; on a tie the one that lasts longer, then a RateLimit item before a policy
//   alone, then the one listed first.
//
// The X-RateLimit form: each value is a plain decimal integer of at most 15 digits (no sign, no
// fraction, no exponent). Remaining and Reset are both needed, Limit is informative; a malformed
// Remaining or Reset makes the form say nothing. A value repeated (several lines, or a
// comma-separated list) counts with its lowest Limit and Remaining and its latest Reset. Reset is
// an absolute Unix time when at least `x_reset_epoch_threshold` (September 2001), otherwise a
// number of seconds from now.
//
// Either form: a reset that is not in the future (a t of 0, an epoch in the past) constrains
// nothing and is skipped, and so is one further away than `max_reset` (draft section 8.5.1: a
// misconfigured or hostile partner must not stop deliveries for days). When the draft fields give
// a quota, the X-RateLimit fields are not read.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace surge::proto {

enum class quota_field { ratelimit_policy, ratelimit, x_limit, x_remaining, x_reset };
inline constexpr std::size_t quota_field_count = 5;

// The quota header fields of one response, as views into its header values: the response must
// outlive this. The caller offers every header of the response (`add`); names are compared
// without regard to case. A field may come as several lines.
class quota_fields {
 public:
  // More lines than this for one field name is not a real partner: that field is ignored.
  static constexpr std::size_t max_lines = 8;

  // Keeps `value` when `name` is one of the five quota fields; returns whether it was.
  bool add(std::string_view name, std::string_view value);
  // Keeps `value` as a line of `field`.
  void add(quota_field field, std::string_view value);

  // The lines kept for `field`, in order; empty when it was absent or had too many lines.
  std::span<const std::string_view> lines(quota_field field) const;

 private:
  struct field_lines {
    std::array<std::string_view, max_lines> values{};
    std::size_t count = 0;
    bool overflowed = false;
  };
  std::array<field_lines, quota_field_count> fields_{};
};

// The quota field `name` names (compared without regard to case), or nullopt: lets a reader
// keep the five fields' values as it meets them, before the response is complete.
std::optional<quota_field> quota_field_named(std::string_view name);

enum class quota_form {
  ratelimit,         // a RateLimit item (with its policy's q and w when the policy is listed)
  ratelimit_policy,  // a RateLimit-Policy item alone: q units over w seconds from now
  x_ratelimit,       // X-RateLimit-Limit / -Remaining / -Reset
};

struct announced_quota {
  quota_form form = quota_form::ratelimit;
  std::optional<std::uint64_t> limit;  // q of the policy, or X-RateLimit-Limit
  std::uint64_t remaining = 0;         // r, or X-RateLimit-Remaining
  // From `now` until the window resets: always in (0, max_reset]. An epoch reset is rounded up.
  std::chrono::seconds reset_after{0};
  // The reset instant: `now` plus the announced delay, or the announced Unix time itself.
  std::chrono::system_clock::time_point reset_at{};
  std::optional<std::chrono::seconds> window;  // the policy's w, when known
};

// X-RateLimit-Reset values from this one on are Unix times: 2001-09-09T01:46:40Z. A delay that
// long (31 years) would be ignored as absurd anyway, so the two readings never compete.
inline constexpr std::uint64_t x_reset_epoch_threshold = 1'000'000'000;

struct quota_parse_options {
  // A reset further away than this is ignored. At most ten years are taken from it.
  std::chrono::seconds max_reset{std::chrono::hours(24)};
};

// The quota that constrains most among what the fields announce, or nullopt when they announce
// nothing usable (absent, malformed, or only resets in the past or too far away).
std::optional<announced_quota> parse_announced_quota(const quota_fields& fields,
                                                     std::chrono::system_clock::time_point now,
                                                     quota_parse_options options = {});

}  // namespace surge::proto
