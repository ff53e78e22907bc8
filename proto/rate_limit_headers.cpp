#include "proto/rate_limit_headers.hpp"

#include <algorithm>

#include "proto/structured_field.hpp"

namespace surge::proto {
namespace {

using std::int64_t;
using std::uint64_t;

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool same_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) {
      return false;
    }
  }
  return true;
}

constexpr std::array<std::string_view, quota_field_count> field_names = {
    "ratelimit-policy", "ratelimit", "x-ratelimit-limit", "x-ratelimit-remaining",
    "x-ratelimit-reset"};

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string_view trim(std::string_view text) {
  constexpr std::string_view space = " \t";
  const std::size_t first = text.find_first_not_of(space);
  if (first == std::string_view::npos) {
    return {};
  }
  return text.substr(first, text.find_last_not_of(space) - first + 1);
}

// ---- The draft's meaning of a List member -------------------------------------------------------

// The parameters read, in the order sf::list_member::parameters holds them.
constexpr std::array<std::string_view, 5> wanted_keys = {"q", "w", "qu", "r", "t"};
enum parameter : std::size_t { param_q, param_w, param_qu, param_r, param_t };

// A policy name as sent: a String between its quotes (escapes kept) or a Token.
struct policy_name {
  std::string_view text;
  bool quoted = false;
};

bool same_name(policy_name a, policy_name b) {
  return sf::same_text(a.text, a.quoted, b.text, b.quoted);
}

std::optional<policy_name> name_of(const sf::list_member& member) {
  if (member.inner_list) {
    return std::nullopt;
  }
  if (member.item.kind == sf::bare_kind::string) {
    return policy_name{member.item.text, true};
  }
  if (member.item.kind == sf::bare_kind::token) {
    return policy_name{member.item.text, false};
  }
  return std::nullopt;
}

std::optional<uint64_t> non_negative_integer(const std::optional<sf::bare_item>& value) {
  if (!value || value->kind != sf::bare_kind::integer || value->integer < 0) {
    return std::nullopt;
  }
  return static_cast<uint64_t>(value->integer);
}

struct policy_item {
  policy_name name;
  uint64_t quota = 0;
  std::optional<uint64_t> window;
  bool counts_requests = true;  // qu absent or "requests"
};

struct limit_item {
  policy_name name;
  uint64_t remaining = 0;
  std::optional<uint64_t> reset;
};

// Section 3.1: a String name (a Token too, here), q a non-negative Integer, w a positive one,
// qu a String.
std::optional<policy_item> as_policy(const sf::list_member& member) {
  const auto name = name_of(member);
  const auto quota = non_negative_integer(member.parameters[param_q]);
  if (!name || !quota) {
    return std::nullopt;
  }
  policy_item policy{*name, *quota, std::nullopt, true};
  if (member.parameters[param_w]) {
    policy.window = non_negative_integer(member.parameters[param_w]);
    if (!policy.window || *policy.window == 0) {
      return std::nullopt;
    }
  }
  if (const auto& unit = member.parameters[param_qu]) {
    if (unit->kind != sf::bare_kind::string) {
      return std::nullopt;
    }
    // Section 3.1.2 spells it "requests", the registry of section 10.3 "request".
    policy.counts_requests = unit->text == "requests" || unit->text == "request";
  }
  return policy;
}

// Section 4.1: a name, r a non-negative Integer, t a non-negative Integer.
std::optional<limit_item> as_limit(const sf::list_member& member) {
  const auto name = name_of(member);
  const auto remaining = non_negative_integer(member.parameters[param_r]);
  if (!name || !remaining) {
    return std::nullopt;
  }
  limit_item limit{*name, *remaining, std::nullopt};
  if (member.parameters[param_t]) {
    limit.reset = non_negative_integer(member.parameters[param_t]);
    if (!limit.reset) {
      return std::nullopt;
    }
  }
  return limit;
}

// The valid items of one field, all its lines together; none when any line fails to parse. A
// field with more members than fit is not a real partner and is ignored too.
template <typename Item>
class item_list {
 public:
  static constexpr std::size_t capacity = 32;

  template <typename Interpret>
  item_list(std::span<const std::string_view> lines, Interpret interpret) {
    std::size_t members = 0;
    for (const std::string_view line : lines) {
      sf::list_reader reader(line, wanted_keys);
      sf::list_member member;
      while (true) {
        const sf::list_step step = reader.next(member);
        if (step == sf::list_step::end) {
          break;
        }
        if (step == sf::list_step::invalid || ++members > capacity) {
          count_ = 0;
          return;
        }
        if (const std::optional<Item> item = interpret(member)) {
          items_[count_++] = *item;
        }
      }
    }
  }

  std::span<const Item> items() const { return {items_.data(), count_}; }

 private:
  std::array<Item, capacity> items_{};
  std::size_t count_ = 0;
};

// ---- Choosing the quota -------------------------------------------------------------------------

struct candidate {
  quota_form form = quota_form::ratelimit;
  uint64_t remaining = 0;
  uint64_t reset = 0;  // seconds, > 0
  std::optional<uint64_t> limit;
  std::optional<uint64_t> window;
};

struct wide {
  uint64_t high = 0;
  uint64_t low = 0;
  auto operator<=>(const wide&) const = default;
};

// The full 128-bit product, so comparing ratios never rounds or overflows.
wide multiply(uint64_t a, uint64_t b) {
  const uint64_t a_lo = a & 0xffffffffu;
  const uint64_t a_hi = a >> 32;
  const uint64_t b_lo = b & 0xffffffffu;
  const uint64_t b_hi = b >> 32;
  const uint64_t lo_lo = a_lo * b_lo;
  const uint64_t hi_lo = a_hi * b_lo;
  const uint64_t lo_hi = a_lo * b_hi;
  const uint64_t hi_hi = a_hi * b_hi;
  const uint64_t middle = (lo_lo >> 32) + (hi_lo & 0xffffffffu) + lo_hi;
  return {hi_hi + (hi_lo >> 32) + (middle >> 32), (middle << 32) | (lo_lo & 0xffffffffu)};
}

// Fewer units left per second until the reset; on a tie, the one that lasts longer. On a full tie
// the first offered stays.
bool constrains_more(const candidate& a, const candidate& b) {
  const wide left = multiply(a.remaining, b.reset);
  const wide right = multiply(b.remaining, a.reset);
  if (left != right) {
    return left < right;
  }
  return a.reset > b.reset;
}

class chooser {
 public:
  explicit chooser(uint64_t max_reset) : max_reset_(max_reset) {}

  void offer(const candidate& c) {
    if (c.reset == 0 || c.reset > max_reset_) {
      return;
    }
    if (!best_ || constrains_more(c, *best_)) {
      best_ = c;
    }
  }
  const std::optional<candidate>& best() const { return best_; }

 private:
  uint64_t max_reset_;
  std::optional<candidate> best_;
};

const policy_item* find_policy(std::span<const policy_item> policies, policy_name name) {
  for (const policy_item& policy : policies) {
    if (same_name(policy.name, name)) {
      return &policy;
    }
  }
  return nullptr;
}

std::optional<candidate> from_draft(const quota_fields& fields, uint64_t max_reset) {
  const item_list<policy_item> policies(fields.lines(quota_field::ratelimit_policy), as_policy);
  const item_list<limit_item> limits(fields.lines(quota_field::ratelimit), as_limit);
  chooser choice(max_reset);
  for (const limit_item& limit : limits.items()) {
    const policy_item* policy = find_policy(policies.items(), limit.name);
    if (policy && !policy->counts_requests) {
      continue;
    }
    candidate c{quota_form::ratelimit, limit.remaining, 0, std::nullopt, std::nullopt};
    if (policy) {
      c.limit = policy->quota;
      c.window = policy->window;
    }
    // Without t, the units left cannot outlast the window they belong to.
    if (limit.reset) {
      c.reset = *limit.reset;
    } else if (c.window) {
      c.reset = *c.window;
    } else {
      continue;
    }
    choice.offer(c);
  }
  // A policy that no RateLimit item reports on is a full window from now: q units over w seconds.
  const std::span<const limit_item> reported = limits.items();
  for (const policy_item& policy : policies.items()) {
    if (!policy.counts_requests || !policy.window) {
      continue;
    }
    const auto named = std::find_if(reported.begin(), reported.end(), [&](const limit_item& l) {
      return same_name(l.name, policy.name);
    });
    if (named != reported.end()) {
      continue;
    }
    choice.offer(
        {quota_form::ratelimit_policy, policy.quota, *policy.window, policy.quota, policy.window});
  }
  return choice.best();
}

// ---- X-RateLimit-* ------------------------------------------------------------------------------

// A plain decimal integer of 1 to 15 digits: no sign, no fraction, no exponent.
std::optional<uint64_t> plain_integer(std::string_view text) {
  if (text.empty() || text.size() > 15) {
    return std::nullopt;
  }
  uint64_t value = 0;
  for (const char c : text) {
    if (!is_digit(c)) {
      return std::nullopt;
    }
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  return value;
}

// Calls `each` with every element of every line (comma-separated) as a plain integer; false when
// the field is absent, when an element is not a plain integer, or when `each` refuses one.
template <typename Each>
bool for_each_value(std::span<const std::string_view> lines, Each each) {
  bool any = false;
  for (std::string_view line : lines) {
    while (true) {
      const std::size_t comma = line.find(',');
      const auto value = plain_integer(trim(line.substr(0, comma)));
      if (!value || !each(*value)) {
        return false;
      }
      any = true;
      if (comma == std::string_view::npos) {
        break;
      }
      line.remove_prefix(comma + 1);
    }
  }
  return any;
}

// The lowest of the values: a value repeated by two layers of a partner's stack counts at its
// most constraining.
std::optional<uint64_t> lowest_value(std::span<const std::string_view> lines) {
  std::optional<uint64_t> lowest;
  const bool ok = for_each_value(lines, [&](uint64_t value) {
    lowest = std::min(value, lowest.value_or(value));
    return true;
  });
  return ok ? lowest : std::nullopt;
}

std::optional<announced_quota> from_x_ratelimit(const quota_fields& fields,
                                                std::chrono::system_clock::time_point now,
                                                uint64_t max_reset) {
  using std::chrono::seconds;
  using time_point = std::chrono::system_clock::time_point;
  const auto remaining = lowest_value(fields.lines(quota_field::x_remaining));
  if (!remaining) {
    return std::nullopt;
  }
  // Every value is bounded in whole seconds before a time point is built from it, so nothing
  // overflows; the latest reset counts.
  const int64_t now_seconds = std::chrono::floor<seconds>(now.time_since_epoch()).count();
  std::optional<time_point> reset_at;
  const bool ok = for_each_value(fields.lines(quota_field::x_reset), [&](uint64_t value) {
    time_point at;
    if (value < x_reset_epoch_threshold) {
      if (value == 0 || value > max_reset) {
        return false;
      }
      at = now + seconds(static_cast<int64_t>(value));
    } else {
      // Both far below 2^62: no overflow. An epoch within the current second is already past.
      const int64_t ahead = static_cast<int64_t>(value) - now_seconds;
      if (ahead <= 0 || static_cast<uint64_t>(ahead) > max_reset) {
        return false;
      }
      at = time_point(seconds(static_cast<int64_t>(value)));
    }
    reset_at = std::max(at, reset_at.value_or(at));
    return true;
  });
  if (!ok) {
    return std::nullopt;
  }
  announced_quota quota;
  quota.form = quota_form::x_ratelimit;
  quota.limit = lowest_value(fields.lines(quota_field::x_limit));
  quota.remaining = *remaining;
  quota.reset_at = *reset_at;
  quota.reset_after = std::chrono::ceil<seconds>(*reset_at - now);
  return quota;
}

}  // namespace

std::optional<quota_field> quota_field_named(std::string_view name) {
  for (std::size_t i = 0; i < quota_field_count; ++i) {
    if (same_ignoring_case(name, field_names[i])) {
      return static_cast<quota_field>(i);
    }
  }
  return std::nullopt;
}

bool quota_fields::add(std::string_view name, std::string_view value) {
  const auto field = quota_field_named(name);
  if (!field) {
    return false;
  }
  add(*field, value);
  return true;
}

void quota_fields::add(quota_field field, std::string_view value) {
  field_lines& lines = fields_[static_cast<std::size_t>(field)];
  if (lines.count == max_lines) {
    lines.overflowed = true;
  } else {
    lines.values[lines.count++] = value;
  }
}

std::span<const std::string_view> quota_fields::lines(quota_field field) const {
  const field_lines& f = fields_[static_cast<std::size_t>(field)];
  if (f.overflowed) {
    return {};
  }
  return {f.values.data(), f.count};
}

std::optional<announced_quota> parse_announced_quota(const quota_fields& fields,
                                                     std::chrono::system_clock::time_point now,
                                                     quota_parse_options options) {
  using std::chrono::seconds;
  constexpr int64_t ten_years = int64_t{10} * 366 * 86400;
  const auto max_reset =
      static_cast<uint64_t>(std::clamp<int64_t>(options.max_reset.count(), 0, ten_years));

  const std::optional<candidate> chosen = from_draft(fields, max_reset);
  if (!chosen) {
    return from_x_ratelimit(fields, now, max_reset);
  }
  announced_quota quota;
  quota.form = chosen->form;
  quota.limit = chosen->limit;
  quota.remaining = chosen->remaining;
  quota.reset_after = seconds(static_cast<int64_t>(chosen->reset));  // at most ten years
  quota.reset_at = now + quota.reset_after;
  if (chosen->window) {
    quota.window = seconds(static_cast<int64_t>(*chosen->window));  // at most 15 digits
  }
  return quota;
}

}  // namespace surge::proto
