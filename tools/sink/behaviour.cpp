#include "tools/sink/behaviour.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

namespace surge::sink {

namespace json = boost::json;

namespace {

[[noreturn]] void fail(std::string_view key, std::string_view why) {
  throw std::invalid_argument("behaviours: \"" + std::string(key) + "\": " + std::string(why));
}

std::optional<double> as_number(const json::value& value) {
  if (value.is_int64()) return static_cast<double>(value.get_int64());
  if (value.is_uint64()) return static_cast<double>(value.get_uint64());
  if (value.is_double()) return value.get_double();
  return std::nullopt;
}

unsigned as_status(std::string_view key, const json::value& value) {
  const auto number = as_number(value);
  if (!number || *number != static_cast<double>(static_cast<unsigned>(*number)) || *number < 100 ||
      *number > 599)
    fail(key, "a status must be an integer in 100..599");
  return static_cast<unsigned>(*number);
}

behaviour parse_one(std::string_view key, const json::value& value) {
  if (!value.is_object()) fail(key, "expected an object");
  behaviour result;
  for (const auto& [field, item] : value.get_object()) {
    if (field == "status") {
      result.status = as_status(key, item);
      result.status_set = true;
    } else if (field == "delay_ms") {
      const auto ms = as_number(item);
      if (!ms || *ms < 0) fail(key, "delay_ms must be a non-negative number");
      result.delay = std::chrono::milliseconds(static_cast<std::int64_t>(*ms));
    } else if (field == "delay_per_request_ms") {
      const auto ms = as_number(item);
      if (!ms || *ms < 0) fail(key, "delay_per_request_ms must be a non-negative number");
      result.delay_per_request = std::chrono::microseconds(static_cast<std::int64_t>(*ms * 1000));
    } else if (field == "mix") {
      if (!item.is_array() || item.get_array().empty()) fail(key, "mix must be a non-empty array");
      for (const auto& entry : item.get_array()) {
        if (!entry.is_array() || entry.get_array().size() != 2)
          fail(key, "each mix entry must be [status, weight]");
        const auto weight = as_number(entry.get_array()[1]);
        if (!weight || *weight < 0) fail(key, "a mix weight must be a non-negative number");
        result.mix.emplace_back(as_status(key, entry.get_array()[0]), *weight);
      }
      double total = 0;
      for (const auto& [status, weight] : result.mix) total += weight;
      if (total <= 0) fail(key, "mix weights must not all be zero");
    } else if (field == "retry_after") {
      if (item.is_string()) {
        result.retry_after = std::string(item.get_string());
      } else if (const auto seconds = as_number(item); seconds && *seconds >= 0) {
        result.retry_after = std::to_string(static_cast<std::int64_t>(*seconds));
      } else {
        fail(key, "retry_after must be a string or a non-negative number");
      }
    } else if (field == "hang" || field == "reset") {
      if (!item.is_bool()) fail(key, std::string(field) + " must be true or false");
      (field == "hang" ? result.hang : result.reset) = item.get_bool();
    } else if (field == "fail_first" || field == "reset_first") {
      const auto count = as_number(item);
      if (!count || *count < 0 || *count > 1e9) fail(key, std::string(field) + " must be a count");
      (field == "fail_first" ? result.fail_first : result.reset_first) = static_cast<int>(*count);
    } else if (field == "trickle_ms") {
      const auto ms = as_number(item);
      if (!ms || *ms < 1) fail(key, "trickle_ms must be a positive number");
      result.trickle = std::chrono::milliseconds(static_cast<std::int64_t>(*ms));
    } else if (field == "body_bytes" || field == "announce_length") {
      const auto bytes = as_number(item);
      // 2^53: exact in a double, and far beyond anything a test streams.
      if (!bytes || *bytes < 0 || *bytes > 9007199254740992.0 ||
          *bytes != static_cast<double>(static_cast<std::uint64_t>(*bytes)))
        fail(key, std::string(field) + " must be a byte count");
      (field == "body_bytes" ? result.body_bytes : result.announce_length) =
          static_cast<std::uint64_t>(*bytes);
    } else if (field == "endless_chunked") {
      if (!item.is_bool()) fail(key, "endless_chunked must be true or false");
      result.endless_chunked = item.get_bool();
    } else if (field == "accept_rate") {
      const auto rate = as_number(item);
      if (!rate || *rate <= 0) fail(key, "accept_rate must be a positive number");
      result.accept_rate = *rate;
    } else if (field == "quota") {
      if (!item.is_object()) fail(key, "quota must be an object");
      for (const auto& [name, setting] : item.get_object()) {
        if (name == "requests") {
          const auto count = as_number(setting);
          if (!count || *count < 1 || *count > 1e9 || *count != std::floor(*count))
            fail(key, "quota.requests must be a positive integer");
          result.quota = static_cast<int>(*count);
        } else if (name == "window_s") {
          const auto seconds = as_number(setting);
          if (!seconds || *seconds < 1 || *seconds > 86400 || *seconds != std::floor(*seconds))
            fail(key, "quota.window_s must be a whole number of seconds in 1..86400");
          result.quota_window = std::chrono::seconds(static_cast<std::int64_t>(*seconds));
        } else if (name == "announce") {
          const std::string_view how =
              setting.is_string() ? std::string_view(setting.get_string()) : std::string_view();
          if (how == "none") {
            result.quota_announce = behaviour::announce::none;
          } else if (how == "draft") {
            result.quota_announce = behaviour::announce::draft;
          } else if (how == "x-seconds") {
            result.quota_announce = behaviour::announce::x_seconds;
          } else if (how == "x-epoch") {
            result.quota_announce = behaviour::announce::x_epoch;
          } else {
            fail(key, "quota.announce must be \"none\", \"draft\", \"x-seconds\" or \"x-epoch\"");
          }
        } else {
          fail(key, "unknown quota field \"" + std::string(name) + "\"");
        }
      }
      if (result.quota == 0 || result.quota_window.count() == 0)
        fail(key, "quota needs requests and window_s");
    } else if (field == "location") {
      if (!item.is_string()) fail(key, "location must be a string");
      result.location = std::string(item.get_string());
    } else {
      fail(key, "unknown field \"" + std::string(field) + "\"");
    }
  }
  // Combinations whose meaning would be a guess are refused rather than silently resolved.
  if (int(result.body_bytes.has_value()) + int(result.announce_length.has_value()) +
          int(result.endless_chunked) >
      1)
    fail(key, "body_bytes, announce_length and endless_chunked exclude each other");
  if (result.reset_first > 0 && (result.reset || result.fail_first > 0))
    fail(key, "reset_first cannot be combined with reset or fail_first");
  return result;
}

}  // namespace

behaviour_set behaviour_set::parse(std::string_view text) {
  std::error_code ec;
  const json::value root = json::parse(json::string_view(text.data(), text.size()), ec);
  if (ec) throw std::invalid_argument("behaviours: not valid JSON: " + ec.message());
  if (!root.is_object()) throw std::invalid_argument("behaviours: expected a JSON object");
  behaviour_set result;
  for (const auto& [key_view, value] : root.get_object()) {
    const std::string_view key(key_view.data(), key_view.size());
    if (key == "*") {
      result.default_ = parse_one(key, value);
      continue;
    }
    std::int64_t id = 0;
    const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (error != std::errc{} || end != key.data() + key.size())
      fail(key, "keys must be subscriber ids or \"*\"");
    result.by_id_[id] = parse_one(key, value);
  }
  return result;
}

behaviour_set behaviour_set::load_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("behaviours: cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return parse(text.str());
}

const behaviour& behaviour_set::for_subscriber(std::optional<std::int64_t> id) const {
  if (id) {
    if (const auto found = by_id_.find(*id); found != by_id_.end()) return found->second;
  }
  return default_;
}

responder::responder(behaviour_set behaviours, std::uint64_t seed)
    : behaviours_(std::move(behaviours)), rng_(seed) {}

action responder::decide(std::optional<std::int64_t> subscriber_id, std::string_view delivery_id) {
  const behaviour& rule = behaviours_.for_subscriber(subscriber_id);
  action result;
  result.delay = rule.delay;
  result.delay_per_request = rule.delay_per_request;
  result.retry_after = rule.retry_after;
  result.location = rule.location;
  result.trickle = rule.trickle;
  if (rule.body_bytes) {
    result.body = body_shape::sized;
    result.body_length = *rule.body_bytes;
  } else if (rule.announce_length) {
    result.body = body_shape::announced;
    result.body_length = *rule.announce_length;
  } else if (rule.endless_chunked) {
    result.body = body_shape::endless_chunked;
  }
  if (rule.hang) {
    result.what = action::kind::hang;
    return result;
  }
  if (rule.reset) result.what = action::kind::reset;
  if (rule.quota > 0 && !within_quota(subscriber_id.value_or(0), rule, result)) {
    result.status = 429;
    return result;
  }
  if (rule.accept_rate > 0) {
    if (over_accept_rate(subscriber_id.value_or(0), rule.accept_rate)) {
      result.status = 429;  // with the rule's retry_after, if any
      return result;
    }
    result.retry_after.clear();
  }

  if (rule.reset_first > 0) {
    std::lock_guard lock(mutex_);
    int& seen = seen_[{subscriber_id.value_or(0), std::string(delivery_id)}];
    ++seen;
    if (seen <= rule.reset_first) {
      result.what = action::kind::reset;
      return result;
    }
    // Past the resets: the configured answer (status, mix) as for any other request.
  }
  if (rule.fail_first > 0) {
    std::lock_guard lock(mutex_);
    int& seen = seen_[{subscriber_id.value_or(0), std::string(delivery_id)}];
    ++seen;
    result.status = seen <= rule.fail_first ? (rule.status_set ? rule.status : 500) : 200;
    if (result.status == 200) result.retry_after.clear();
    return result;
  }
  if (!rule.mix.empty()) {
    std::vector<double> weights;
    for (const auto& entry : rule.mix) weights.push_back(entry.second);
    std::discrete_distribution<std::size_t> pick(weights.begin(), weights.end());
    std::lock_guard lock(mutex_);
    result.status = rule.mix[pick(rng_)].first;
    return result;
  }
  result.status = rule.status;
  return result;
}

bool responder::within_quota(std::int64_t subscriber_id, const behaviour& rule, action& result) {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const auto window_s = static_cast<double>(rule.quota_window.count());
  const auto index = static_cast<std::int64_t>(std::floor(now / window_s));
  const double reset_at = static_cast<double>(index + 1) * window_s;
  // Whole seconds, rounded up: a partner must not announce its reset earlier than it comes.
  const auto seconds_left = static_cast<std::int64_t>(std::ceil(reset_at - now));
  int left = 0;
  bool within = false;
  {
    std::lock_guard lock(mutex_);
    auto& window = quota_windows_[subscriber_id];
    if (window.index != index) window = {index, 0};
    within = window.used < rule.quota;
    if (within) ++window.used;
    left = rule.quota - window.used;
  }
  if (!within) result.retry_after = std::to_string(std::max<std::int64_t>(1, seconds_left));
  const std::string limit = std::to_string(rule.quota);
  switch (rule.quota_announce) {
    case behaviour::announce::none: break;
    case behaviour::announce::draft:
      result.headers.emplace_back(
          "RateLimit-Policy",
          "\"quota\";q=" + limit + ";w=" + std::to_string(rule.quota_window.count()));
      result.headers.emplace_back("RateLimit", "\"quota\";r=" + std::to_string(left) +
                                                   ";t=" + std::to_string(seconds_left));
      break;
    case behaviour::announce::x_seconds:
    case behaviour::announce::x_epoch:
      result.headers.emplace_back("X-RateLimit-Limit", limit);
      result.headers.emplace_back("X-RateLimit-Remaining", std::to_string(left));
      result.headers.emplace_back("X-RateLimit-Reset",
                                  std::to_string(rule.quota_announce == behaviour::announce::x_epoch
                                                     ? static_cast<std::int64_t>(reset_at)
                                                     : seconds_left));
      break;
  }
  return within;
}

bool responder::over_accept_rate(std::int64_t subscriber_id, double rate) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  auto [it, fresh] = accept_buckets_.try_emplace(subscriber_id, accept_bucket{rate, now});
  auto& bucket = it->second;
  const double elapsed = std::chrono::duration<double>(now - bucket.updated).count();
  bucket.tokens = std::min(rate, bucket.tokens + elapsed * rate);
  bucket.updated = now;
  if (bucket.tokens < 1.0) return true;
  bucket.tokens -= 1.0;
  return false;
}

}  // namespace surge::sink
