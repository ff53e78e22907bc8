#pragma once
// Keep-alive HTTP/1.1 and HTTPS client for one shard. Not thread-safe: it
// lives on its shard's io_context thread, like the subscribers that use it.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/ssl/context.hpp>

#include "engine/net/client_identity.hpp"
#include "engine/config.hpp"
#include "engine/net/connection_state.hpp"
#include "engine/net/deadline_slots.hpp"
#include "engine/net/dns_resolver.hpp"
#include "engine/net/http_result.hpp"
#include "engine/net/tls_sessions.hpp"
#include "proto/outcome.hpp"
#include "proto/target_policy.hpp"

namespace surge::engine {

// Where the client counts its connections (process-wide metrics); any of them may be null.
struct http_client_counters {
  std::atomic<std::int64_t>* open_connections = nullptr;  // a gauge: up on connect, down on close
  std::atomic<std::int64_t>* tls_full_handshakes = nullptr;
  std::atomic<std::int64_t>* tls_resumed_handshakes = nullptr;  // SSL_session_reused
};

class http_client {
 public:
  http_client(boost::asio::any_io_executor executor, std::shared_ptr<boost::asio::ssl::context> tls,
              http_client_config config, http_client_counters counters = {});
  ~http_client();
  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;

  // Asked right before each write of the request (after connect and TLS, and again before the
  // one fresh retry), so that a caller's rate limit is charged when the request goes on the
  // wire; told whether the request is the first on a new connection. False gives up: the
  // request is not written. The time spent waiting in it is not taken from the attempt's
  // deadline.
  class write_gate {
   public:
    // The answer when it can be given at once: true lets the write go (its charge is taken),
    // false gives up. Nullopt: only waiting can tell, and `wait` is awaited instead. Most
    // writes are let through here, without a coroutine frame or a timer of their own.
    virtual std::optional<bool> decide_now(bool fresh_connection, steady_time now) = 0;
    virtual boost::asio::awaitable<bool> wait(bool fresh_connection) = 0;

   protected:
    ~write_gate() = default;
  };

  // Sends `request`, the whole message's bytes (write_delivery_request), to `target` within the
  // attempt deadline, reusing an idle connection of the origin when one is there. The bytes must
  // stay put until the send returns. Never throws for network failures: they come back as
  // errors. With an `identity`, a TLS connection presents its client certificate; connections
  // and resumption sessions are pooled per origin and identity, never shared between them.
  // With a `proxy`, the connections leave through it (pooled apart from others); without one,
  // through the configured proxy, if any.
  boost::asio::awaitable<http_result> send(const proto::target& target, std::string_view request,
                                           write_gate* gate = nullptr,
                                           std::shared_ptr<const client_identity> identity = {},
                                           const egress_proxy* proxy = nullptr);

  // Bytes of read buffer the idle connections hold: none once they have been idle for
  // idle_buffer_release and evict_idle has run since.
  std::size_t idle_buffer_bytes() const;

  // Closes connections idle for longer than the idle timeout, and takes the read buffers of
  // those idle for idle_buffer_release.
  void evict_idle();
  // Closes every idle connection (shutdown).
  void close_idle();

 private:
  struct pooled_connection;
  using connection_ptr = std::unique_ptr<pooled_connection>;
  struct origin_pool;

  boost::asio::awaitable<connection_ptr> open(const proto::target& target, origin_pool& pool,
                                              steady_time deadline, http_result& result);
  origin_pool& origin_for(const proto::target& target,
                          const std::shared_ptr<const client_identity>& identity,
                          const egress_proxy* proxy);
  void close(connection_ptr conn);
  // Under config_.max_connections, room for one more socket: while the connections open and
  // being opened reach it, the one idle longest over all origins is closed. With none idle,
  // every connection carries a request, and the in-flight ceiling bounds them.
  void make_room_for_a_connection();
  // Closes the connection idle longest over all origins; false when none is idle.
  bool close_longest_idle();
  // Until a session of `pool`'s origin is stored or the handshake it waits for ends (true), or
  // `until` (false).
  boost::asio::awaitable<bool> wait_for_session(origin_pool& pool, steady_time until);
  // The connection's full handshake was the one its origin waited for: that wait is over.
  void end_handshake_turn(origin_pool& pool, pooled_connection& conn, bool handshake_succeeded,
                          steady_time now);
  // Back to the origin's idle list.
  void park(origin_pool& pool, connection_ptr conn, steady_time now);
  // The exchange's deadline, kept by the client's one timer (engine/net/deadline_slots.hpp).
  class exchange_watch;
  void watch(pooled_connection& conn, steady_time deadline);
  void unwatch(pooled_connection& conn);
  void arm_deadline_timer(steady_time at);

  boost::asio::any_io_executor executor_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  http_client_config config_;
  http_client_counters counters_;
  tls_session_cache sessions_;  // this shard's, so no lock between shards
  dns_resolver resolver_;       // this shard's too
  // By origin key, and identity key after it when there is one. Never erased: each origin's
  // tls_session_home must outlive its connections.
  std::unordered_map<std::string, std::unique_ptr<origin_pool>> origins_;
  std::string origin_key_;       // origin_for's key, built in place for each send
  std::size_t connections_ = 0;  // connected, until closed
  std::size_t connecting_ = 0;   // connects under way, each holding a socket
  deadline_slots<pooled_connection> deadlines_;
  boost::asio::steady_timer deadline_timer_;
};

}  // namespace surge::engine
