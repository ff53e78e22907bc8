#pragma once
// How many connections an origin pool needs, sans-I/O. One connection carries one request at a
// time, so a pool needs as many as its origin has requests at once: by Little's law, its rate
// times each request's time. A pool that opens a connection whenever a request finds none idle
// keeps what its busiest moment needed for the whole idle allowance; when requests in flight
// move between origins (the process cap full, partners' bursts), each of a shard's pools peaks
// at its own moment, and a drain to 50 slow origins held 1.5 to 2 times as many connections as
// it had requests in flight. Held to its need, a pool lets a request that finds no idle
// connection wait for one of its busy ones instead, which comes back within a fraction of a
// request's time. The I/O side (engine/net/http_client.cpp) parks the waiting requests and
// hands them the connections that come back.
#include <chrono>
#include <optional>

namespace surge::engine {

struct connection_need_config {
  // The need is the requests the origin had at once, on average over the last one to two
  // windows: it follows a change of rate or latency within a window or two.
  std::chrono::milliseconds window{1000};
  // Above the average: requests bunch within a window.
  double headroom = 1.25;
  // And this many more: an origin with a request or two at once never waits for its own.
  int spare = 2;
  // A request waits only while the pool's busy connections are at least this many times the
  // requests waiting with it, so that one comes back within a fraction of a request's time; a
  // burst beyond that (the rate rising faster than the window follows) opens at once.
  int busy_per_waiting = 4;
  // A request waits no longer than this for a busy connection of its origin, then opens one: a
  // partner that became slower costs a request this much at most. 0: requests never wait (a
  // connection per concurrent request).
  std::chrono::milliseconds max_wait{100};

  friend bool operator==(const connection_need_config&, const connection_need_config&) = default;
};

class connection_need {
 public:
  using clock = std::chrono::steady_clock;
  using time_point = clock::time_point;

  explicit connection_need(const connection_need_config& config) : config_(config) {}

  // A request wants a connection of the origin, and is done with it (answered, failed, given
  // up): between the two it counts towards the need, waiting or not.
  void on_request(time_point now);
  void on_done(time_point now);
  // The connections the pool needs, or nullopt until a whole window has been measured (the
  // pool opens as requests need, as at the start).
  std::optional<int> need(time_point now);
  // Whether a request that found no idle connection opens one, with `open` connections open or
  // opening (all of them busy) and `waiting` requests already waiting; if not, it waits.
  bool may_open(int open, int waiting, time_point now);
  std::chrono::milliseconds max_wait() const { return config_.max_wait; }

 private:
  void advance(time_point now);

  connection_need_config config_;
  int requests_ = 0;  // at this moment
  bool started_ = false;
  bool measured_ = false;  // a whole window is behind
  time_point window_start_{};
  time_point last_{};
  // Requests at once, integrated over each window (request-nanoseconds).
  double current_area_ = 0;
  double previous_area_ = 0;
};

}  // namespace surge::engine
