#pragma once
// What the client's two halves share: engine/net/http_client.cpp (the exchange, the pools) and
// engine/net/http_connect.cpp (resolve, check, connect, TLS handshake). Private to engine/.
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include <boost/asio/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/system/error_code.hpp>
#include <openssl/ssl.h>

#include "engine/awaiting.hpp"
#include "engine/net/handshake_gate.hpp"
#include "engine/net/http_client.hpp"
#include "engine/net/tls_socket.hpp"

namespace surge::engine::detail {

// A counter the caller may not have wired (nullptr in tests).
inline void count(std::atomic<std::int64_t>* counter, std::int64_t n) {
  if (counter) counter->fetch_add(n, std::memory_order_relaxed);
}

// Beast's stream deadline and the kernel's own both end an operation as a timeout.
inline bool is_timeout(const boost::system::error_code& ec) {
  return ec == boost::beast::error::timeout || ec == boost::asio::error::timed_out;
}

// The process's (EMFILE) or the system's (ENFILE) file table is full: no fault of the partner's.
inline bool out_of_descriptors(const boost::system::error_code& ec) {
  return ec.category() == boost::system::system_category() &&
         (ec.value() == EMFILE || ec.value() == ENFILE);
}

// What input_pending looks at: the socket and, with TLS, the OpenSSL session.
struct connection_view {
  int fd = -1;
  SSL* ssl = nullptr;
};

}  // namespace surge::engine::detail

namespace surge::engine {

struct http_client::pooled_connection {
  explicit pooled_connection(boost::beast::tcp_stream connected) : stream(std::move(connected)) {}

  boost::beast::tcp_stream& lowest() { return stream; }
  detail::connection_view view() {
    return {stream.socket().native_handle(), tls ? tls->native_handle() : nullptr};
  }

  boost::beast::tcp_stream stream;
  std::optional<tls_socket> tls;     // for https; destroyed first (SSL_free), then the socket
  boost::beast::flat_buffer buffer;  // kept across responses; a fresh parser reads each one
  connection_lifecycle lifecycle;
  // While an exchange is under way: its place among the client's deadlines, whether the
  // deadline has come (the client then shuts the socket down and cancels its operations), and
  // the client that watches it (reset if the client goes first, at shutdown).
  // Set while this connection's full handshake is the one its origin's new connections wait
  // for (first_handshake_gate::full_for_all), until its first exchange ends.
  std::optional<std::uint64_t> handshake_turn;
  std::size_t deadline_slot = 0;
  bool deadline_passed = false;
  http_client* watched_by = nullptr;
};

// Keeps an exchange's (or a TLS handshake's) deadline with the client's one timer while it lives.
class http_client::exchange_watch {
 public:
  exchange_watch(http_client& client, pooled_connection& conn, steady_time deadline) : conn_(conn) {
    client.watch(conn, deadline);
  }
  ~exchange_watch() {
    if (conn_.watched_by != nullptr) conn_.watched_by->unwatch(conn_);
  }
  exchange_watch(const exchange_watch&) = delete;
  exchange_watch& operator=(const exchange_watch&) = delete;

 private:
  pooled_connection& conn_;
};

struct http_client::origin_pool {
  origin_pool(std::chrono::steady_clock::duration idle_timeout, tls_session_home home,
              std::shared_ptr<const client_identity> who,
              std::chrono::steady_clock::duration no_session_hold)
      : identity(std::move(who)),
        sessions(std::move(home)),
        idle(idle_timeout),
        gate(no_session_hold) {
    // The pool never moves (the client holds it by pointer), so the home may point back to it.
    sessions.on_stored = [this] {
      gate.on_session_stored();
      wake_handshake_waiters();
    };
  }
  // A connect waiting for the session (http_client::wait_for_session); `pool` is reset when
  // the pool goes first (shutdown: the io_context destroys the waiting frames after the client).
  struct session_waiter {
    boost::asio::steady_timer timer;
    origin_pool* pool;
  };
  void wake_handshake_waiters() {
    auto waiting = std::move(handshake_waiters);
    handshake_waiters.clear();
    for (auto* waiter : waiting) waiter->timer.cancel();
  }
  ~origin_pool() {
    for (auto* waiter : handshake_waiters) waiter->pool = nullptr;
  }
  // The client certificate its TLS connections present (null: none); its context must outlive
  // them, hence declared before them.
  std::shared_ptr<const client_identity> identity;
  tls_session_home sessions;  // declared first: destroyed after the connections that point to it
  idle_list<connection_ptr> idle;
  // The proxy its connections leave through (the subscriber's, or the drain's), if any.
  std::optional<egress_proxy> proxy;
  // New TLS connections wait here for the session another one's full handshake brings.
  first_handshake_gate gate;
  std::vector<session_waiter*> handshake_waiters;
};

}  // namespace surge::engine
