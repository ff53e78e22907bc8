#pragma once
// Per-subscriber answers of the sink, configured from a JSON object keyed by subscriber id with
// an optional "*" default, e.g. {"3": {"status": 500}, "5": {"mix": [[200, 0.7], [503, 0.3]]}}.
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace surge::sink {

struct behaviour {
  unsigned status = 200;
  bool status_set = false;  // fail_first defaults its failing status to 500 otherwise
  std::chrono::milliseconds delay{0};
  // Added to `delay` once per request the sink is answering at that moment, this one included:
  // a receiver that slows down under load (for the adaptive concurrency tests).
  std::chrono::microseconds delay_per_request{0};
  std::vector<std::pair<unsigned, double>> mix;  // (status, weight); replaces status when set
  std::string retry_after;                       // sent verbatim when not empty
  bool hang = false;
  bool reset = false;
  int fail_first = 0;
  // Hostile or broken answers, for the drainer's fault tests:
  int reset_first = 0;                   // reset the first N requests per delivery id, then answer
  std::chrono::milliseconds trickle{0};  // write the whole response one byte per interval
  std::optional<std::uint64_t> body_bytes;       // a body this long, streamed, Content-Length
  std::optional<std::uint64_t> announce_length;  // announce this Content-Length, send "{}"
  bool endless_chunked = false;                  // a chunked body that never ends
  std::string location;                          // a Location header (for 3xx tests)
  // Accept at most this many requests per second per subscriber (a bucket of one second's
  // worth); the rest get 429 (with `retry_after` if set). 0: no limit. For adaptive-rate tests.
  double accept_rate = 0;
  // A partner's quota: at most `quota` requests per subscriber in each fixed window of
  // `quota_window` (windows aligned to the Unix clock, as most APIs count them); beyond it 429
  // with Retry-After until the window resets. Every answer announces what is left when
  // `quota_announce` says how: the IETF draft's RateLimit-Policy and RateLimit (seconds left
  // rounded up), or X-RateLimit-Limit/-Remaining/-Reset with the reset as seconds left or as
  // the Unix time of the reset. 0: no quota.
  int quota = 0;
  std::chrono::seconds quota_window{0};
  enum class announce { none, draft, x_seconds, x_epoch } quota_announce = announce::none;
};

class behaviour_set {
 public:
  // Throws std::invalid_argument naming the offending key; unknown fields are errors so that a
  // typo does not silently turn into "answer 200".
  static behaviour_set parse(std::string_view json);
  static behaviour_set load_file(const std::string& path);

  // The subscriber's entry, else "*", else the plain 200 behaviour.
  const behaviour& for_subscriber(std::optional<std::int64_t> id) const;

 private:
  std::map<std::int64_t, behaviour> by_id_;
  behaviour default_;
};

// How the response body is produced. Everything but `normal` is streamed by the server, never
// held in memory, and closes or holds the connection as the shape demands.
enum class body_shape { normal, sized, announced, endless_chunked };

struct action {
  enum class kind { respond, hang, reset };
  kind what = kind::respond;
  unsigned status = 200;
  std::chrono::milliseconds delay{0};
  std::chrono::microseconds delay_per_request{0};
  std::string retry_after;
  std::string location;
  std::chrono::milliseconds trickle{0};
  body_shape body = body_shape::normal;
  std::uint64_t body_length = 0;  // sized: bytes sent; announced: Content-Length claimed
  std::vector<std::pair<std::string, std::string>> headers;  // more fields of the answer
};

// The mutable half of behaviours: the seeded RNG for mixes and the fail_first / reset_first
// counters. Thread-safe.
class responder {
 public:
  explicit responder(behaviour_set behaviours, std::uint64_t seed = 1);

  action decide(std::optional<std::int64_t> subscriber_id, std::string_view delivery_id);

 private:
  behaviour_set behaviours_;
  std::mutex mutex_;
  std::mt19937_64 rng_;
  // Keyed by subscriber and delivery id: delivery ids are row ids, but a test may reuse them.
  std::map<std::pair<std::int64_t, std::string>, int, std::less<>> seen_;
  struct accept_bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point updated;
  };
  std::map<std::int64_t, accept_bucket> accept_buckets_;
  bool over_accept_rate(std::int64_t subscriber_id, double rate);
  struct quota_window {
    std::int64_t index = -1;
    int used = 0;
  };
  std::map<std::int64_t, quota_window> quota_windows_;
  // Counts the request against the subscriber's quota and says so in `result`; false when the
  // quota was already spent (the answer is then 429).
  bool within_quota(std::int64_t subscriber_id, const behaviour& rule, action& result);
};

}  // namespace surge::sink
