#pragma once
// Concurrent first connects to one origin, sans-I/O: when a burst opens many connections to an
// origin the shard holds no TLS session for, one does the full handshake and the others wait
// for the session it brings back (a TLS 1.3 ticket arrives with its first response, a TLS 1.2
// session at the end of its handshake), then resume with it. Without the wait, each of them
// does a full handshake: 8 per origin at the start of a drain over 200 origins.
//
// An origin that gives no session (tickets off) is not waited for again for a while: its
// connections all do full handshakes at once, as they would anyway. One gate per origin pool
// (origin and client identity) per shard; the I/O side (engine/net/http_connect.cpp) parks
// the waiting connects and wakes them when wake_waiters() says.
#include <chrono>
#include <cstdint>

namespace surge::engine {

class first_handshake_gate {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  enum class step {
    resume,        // a session is there: offer it
    full,          // no session, and none expected: a full handshake, no one waits for it
    full_for_all,  // no session: this connect's full handshake is the one the others await
    wait,          // another connect's full handshake is bringing a session: wait for it
  };

  explicit first_handshake_gate(std::chrono::steady_clock::duration no_session_hold)
      : no_session_hold_(no_session_hold) {}

  struct decision {
    step what;
    std::uint64_t turn = 0;  // for full_for_all: what on_full_for_all_done is given back
  };
  // Before a new connection's handshake.
  decision on_connect(bool session_available, time_point now);
  // A session of the origin was stored: the connects waiting may resume with it.
  void on_session_stored();
  // The connect that took full_for_all is done: its handshake failed (another connect may try
  // at once), or its first exchange ended (a session stored by then was already reported; if
  // none was, the origin gives none and is not waited for until no_session_hold has passed).
  // A `turn` that is no longer the current one (its session came, and a later connect found
  // none left and took a turn of its own) changes nothing.
  void on_full_for_all_done(std::uint64_t turn, bool handshake_succeeded, time_point now);
  // Whether waiting connects should look again (the last event let them proceed).
  bool wake_waiters() const { return !full_under_way_; }

 private:
  std::chrono::steady_clock::duration no_session_hold_;
  bool full_under_way_ = false;
  std::uint64_t turn_ = 0;
  time_point not_waiting_until_{};
};

}  // namespace surge::engine
