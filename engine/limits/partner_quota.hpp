#pragma once
// A subscriber's partner's announced quota as the drain keeps it between responses, and the pace
// each new announcement sets (DESIGN section 3, "The partner's own announcement counts").
// Sans-I/O: wall-clock time is passed in, since resets are wall-clock instants.
//
// Reading one response is proto::parse_announced_quota; pacing from one quota is
// proto::pace_for_quota. What this adds is what several responses in a row mean:
// - within one window the units left only go down, and every response's reset is at or after
//   the real one (a partner rounds the seconds left up, or says the epoch of the reset: a reset
//   announced early would be refused anyway). So a response of the same window as the last
//   keeps the lower of the two counts and the earlier of the two resets. Responses on other
//   connections can be answered in another order than they were counted, and whole seconds
//   would otherwise cost up to a second of every window (with `t` rounded up, the units left
//   are spread over a second more than there is: about 5 % of a 10 s window);
// - a response is of the same window when it comes before the last reset and names a reset less
//   than a second after it (a later window resets at least a second later);
// - a RateLimit-Policy without a RateLimit item says no count and no reset, only "q units per
//   w seconds": each such response is read afresh as a whole window from now and replaces the
//   last, since keeping the first one's reset would crowd the same q units into less and less
//   time;
// - the partner has not counted what is still on its way: requests of ours in flight when its
//   answer was written. Each other request of the subscriber in flight is taken from the units
//   left before pacing, so they are never spent twice.
// A response that announces nothing changes nothing: the pace set before lasts until its reset.
#include <chrono>
#include <optional>

#include "proto/announced_pace.hpp"
#include "proto/rate_limit_headers.hpp"

namespace surge::engine {

class partner_quota {
 public:
  using time_point = std::chrono::system_clock::time_point;

  // One response's announcement (nullopt: none that could be used), with the subscriber's other
  // requests in flight, the Retry-After honoured for this response, and the configured limit.
  // The pace to apply until its `until`; nullopt when the response announced nothing.
  std::optional<proto::announced_pace> on_response(
      const std::optional<proto::announced_quota>& announced, int others_in_flight,
      std::optional<std::chrono::seconds> retry_after, proto::configured_limit configured,
      time_point now);

  // The announcement as kept (merged over the window), and when it was last updated; nullopt
  // before any.
  const std::optional<proto::announced_quota>& latest() const { return latest_; }
  time_point seen_at() const { return seen_at_; }
  // The pace the latest announcement set.
  const proto::announced_pace& pace() const { return pace_; }

 private:
  std::optional<proto::announced_quota> latest_;
  time_point seen_at_{};
  proto::announced_pace pace_{};
};

}  // namespace surge::engine
