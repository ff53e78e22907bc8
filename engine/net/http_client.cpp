#include "engine/net/http_client.hpp"
#include "engine/net/http_client_support.hpp"
#include "engine/net/response_reader.hpp"

#include <tuple>
#include <type_traits>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <cerrno>

namespace surge::engine {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using detail::connection_view;
using detail::count;
using detail::is_timeout;
using proto::transport_error;

http_client::http_client(asio::any_io_executor executor, std::shared_ptr<ssl::context> tls,
                         http_client_config config, http_client_counters counters)
    : executor_(std::move(executor)),
      tls_(std::move(tls)),
      config_(std::move(config)),
      counters_(counters),
      sessions_(config_.tls_sessions),
      resolver_(executor_, config_.dns),
      deadline_timer_(executor_) {}

http_client::~http_client() {
  // Exchanges still under way belong to coroutine frames the io_context destroys after us.
  deadlines_.for_each([](pooled_connection& conn) { conn.watched_by = nullptr; });
}

void http_client::watch(pooled_connection& conn, steady_time deadline) {
  conn.deadline_passed = false;
  // Armed before the slot is taken: if arming throws, nothing is left pointing at `conn`; if
  // taking the slot throws, the timer only wakes once for nothing.
  if (deadline < deadlines_.wake_at()) arm_deadline_timer(deadline);
  deadlines_.add(conn, deadline);
  conn.watched_by = this;
}

void http_client::unwatch(pooled_connection& conn) {
  conn.watched_by = nullptr;
  // The last one out stops the timer, so an idle shard holds no pending wait.
  if (deadlines_.remove(conn)) deadline_timer_.cancel();
}

void http_client::arm_deadline_timer(steady_time at) {
  deadline_timer_.expires_at(at);
  deadline_timer_.async_wait([this](const error_code& ec) {
    if (ec) return;  // set again or cancelled since: that wait is the one that counts
    const auto next =
        deadlines_.on_wake(std::chrono::steady_clock::now(), [](pooled_connection& conn) {
          // Once and for good: the operation under way ends (cancel), and so does any started
          // after this, whose completion may already be queued behind this handler (shutdown: a
          // read sees EOF, a write fails at once). run_exchange reads either as the deadline
          // through deadline_passed, and the connection is not reused. Not close(): the exchange
          // still holds the descriptor's number, which a new connection could be given.
          conn.deadline_passed = true;
          error_code ignored;
          conn.lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
          conn.lowest().socket().cancel(ignored);
        });
    if (next) arm_deadline_timer(*next);
  });
}

http_client::origin_pool& http_client::origin_for(
    const proto::target& target, const std::shared_ptr<const client_identity>& identity,
    const egress_proxy* proxy) {
  // A newline cannot be part of an origin key (proto::parse_target_url), so an identity's pool
  // never shares a key with a plain one. The key is put together in a buffer kept for it, so
  // finding the pool of a send allocates nothing.
  origin_key_.assign(target.origin_key);
  if (identity) origin_key_.append("\nclient-cert ").append(identity->key);
  if (proxy) {
    origin_key_.append("\nproxy ")
        .append(proxy->host)
        .append(":")
        .append(std::to_string(proxy->port));
  }
  auto found = origins_.find(origin_key_);
  if (found == origins_.end()) {
    found = origins_
                .emplace(origin_key_,
                         std::make_unique<origin_pool>(
                             config_.idle_timeout, tls_session_home{&sessions_, origin_key_, {}},
                             identity, config_.tls_no_session_hold))
                .first;
    found->second->proxy = proxy ? std::optional<egress_proxy>(*proxy) : config_.proxy;
  }
  return *found->second;
}

void http_client::close(connection_ptr conn) {
  if (!conn) return;
  if (conn->tls && conn->lifecycle.ended_cleanly()) {
    // OpenSSL makes the session of a TLS connection freed without close_notify unresumable (a
    // TLS 1.0 rule, dropped since TLS 1.1), which would spoil the cached session it shares.
    // None is sent here (servers close on EOF), so a connection that ended well says so; a
    // failed one keeps the rule.
    SSL_set_shutdown(conn->tls->native_handle(), SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
  }
  error_code ignored;
  conn->lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
  conn->lowest().close();
  count(counters_.open_connections, -1);
  --connections_;
}

void http_client::make_room_for_a_connection() {
  if (config_.max_connections == 0) return;
  while (connections_ + connecting_ >= config_.max_connections && close_longest_idle()) {
  }
}

bool http_client::close_longest_idle() {
  origin_pool* longest = nullptr;
  steady_time since{};
  for (auto& [key, pool] : origins_) {
    const auto parked = pool->idle.longest_idle_since();
    if (parked && (longest == nullptr || *parked < since)) {
      longest = pool.get();
      since = *parked;
    }
  }
  if (longest == nullptr) return false;
  close(longest->idle.take_longest_idle());
  return true;
}

asio::awaitable<bool> http_client::wait_for_session(origin_pool& pool, steady_time until) {
  origin_pool::session_waiter waiter{asio::steady_timer(executor_, until), &pool};
  // Off the list however the wait ends, the coroutine's frame destroyed at shutdown included
  // (after the pool, which then reset waiter.pool).
  struct listed {
    origin_pool::session_waiter& waiter;
    ~listed() {
      if (waiter.pool != nullptr) std::erase(waiter.pool->handshake_waiters, &waiter);
    }
  } on_list{waiter};
  pool.handshake_waiters.push_back(&waiter);
  auto [ec] = co_await waiter.timer.async_wait(use_tuple);
  co_return ec == asio::error::operation_aborted;
}

void http_client::end_handshake_turn(origin_pool& pool, pooled_connection& conn,
                                     bool handshake_succeeded, steady_time now) {
  if (!conn.handshake_turn) return;
  pool.gate.on_full_for_all_done(*conn.handshake_turn, handshake_succeeded, now);
  conn.handshake_turn.reset();
  if (pool.gate.wake_waiters()) pool.wake_handshake_waiters();
}

void http_client::park(origin_pool& pool, connection_ptr conn, steady_time now) {
  pool.idle.put(std::move(conn), now);
}

std::size_t http_client::idle_buffer_bytes() const {
  std::size_t bytes = 0;
  for (const auto& [key, entry] : origins_) {
    entry->idle.for_each(
        [&bytes](const connection_ptr& conn) { bytes += conn->buffer.capacity(); });
  }
  return bytes;
}

void http_client::evict_idle() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<connection_ptr> expired;
  for (auto& [key, entry] : origins_) {
    entry->idle.evict(now, expired);
    // A connection idle for a while gives its read buffer back (16 KiB; the next exchange
    // allocates it again). Not at once: a busy connection would free and allocate it for
    // every request. A reusable connection has no bytes beyond its response, so it is empty.
    entry->idle.for_each_idle_since(now - config_.idle_buffer_release, [](connection_ptr& conn) {
      if (conn->buffer.capacity() == 0) return false;  // and every one idle longer
      if (conn->buffer.size() == 0) conn->buffer.shrink_to_fit();
      return true;
    });
  }
  for (auto& conn : expired) close(std::move(conn));
}

void http_client::close_idle() {
  std::vector<connection_ptr> all;
  for (auto& [key, entry] : origins_) entry->idle.clear(all);
  for (auto& conn : all) close(std::move(conn));
}

namespace {

// Whether anything (bytes, EOF or an error) waits to be read on `conn`, without reading it.
// With TLS, records OpenSSL or its BIO already hold count too; kernel bytes count only when
// `raw_tls_counts`: right after a handshake they may be TLS 1.3 session tickets, which are not
// a response (they are consumed while the first response is read).
bool input_pending(connection_view conn, bool raw_tls_counts) {
  if (conn.ssl != nullptr) {
    if (SSL_has_pending(conn.ssl) == 1 || BIO_ctrl_pending(SSL_get_rbio(conn.ssl)) > 0) {
      return true;
    }
    if (!raw_tls_counts) return false;
  }
  char byte = 0;
  for (;;) {
    const auto n = ::recv(conn.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n >= 0) return true;  // a byte, or 0: the peer closed
    if (errno == EINTR) continue;
    return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

// Sized to a webhook response (a status line and a few headers; bodies are kept to 4 KiB), not
// to the largest header allowed: each request waiting for its answer holds this much, and a
// larger answer takes a few more reads.
constexpr std::size_t read_chunk = 4 * 1024;

// A plain exchange runs on the socket under Beast's stream, without Beast's `transfer_op`
// around each operation, and `co_await` starts the operation directly (use_tuple); a TLS one
// on engine/net/tls_socket.hpp.
template <class Stream>
constexpr bool is_plain = std::is_same_v<Stream, tcp::socket>;

// Writes the exchange's status, error and what the response said into `out`.
template <class Stream>
asio::awaitable<void> run_exchange(Stream& stream, beast::tcp_stream& lowest, connection_view view,
                                   beast::flat_buffer& buffer, connection_lifecycle& lifecycle,
                                   std::string_view request, steady_time deadline,
                                   const bool& deadline_passed, const http_client_config& config,
                                   http_result& out) {
  lifecycle.on_exchange_start();
  // The client's deadline timer ends the operations at `deadline` (http_client::watch);
  // Beast's own would be armed and cancelled around each one.
  lowest.expires_never();
  // Usually one write takes it all. When it does not, response bytes arriving before the request
  // is fully written are looked for between writes: the server answered without reading all of
  // it, and the rest of our request could read to it as another one. The answer still stands;
  // the connection is not reused.
  bool early = false;
  const bool raw_tls_counts = lifecycle.exchanges() > 1;
  for (std::size_t written = 0; written < request.size();) {
    if (deadline_passed) {
      out.error = transport_error::timeout;
      out.detail = "sending request: the attempt deadline passed";
      lifecycle.on_failure();
      co_return;
    }
    const auto rest = asio::buffer(request.data() + written, request.size() - written);
    std::tuple<error_code, std::size_t> outcome;
    if constexpr (is_plain<Stream>) {
      outcome = co_await stream.async_write_some(rest, use_tuple);
    } else {
      outcome = co_await stream.write_some(rest);
    }
    auto [write_ec, n] = outcome;
    if (write_ec) {
      out.error = is_timeout(write_ec) || deadline_passed ? transport_error::timeout
                                                          : transport_error::send;
      out.detail = "sending request: " + write_ec.message();
      lifecycle.on_failure();
      co_return;
    }
    written += n;
    if (written < request.size() && !early && input_pending(view, raw_tls_counts)) early = true;
  }

  response_reader reader(config);
  // One read loop for interim responses, the final header and the body prefix, all within the
  // attempt deadline: an expired stream timer does not fire while reads keep completing, so the
  // deadline is also checked between reads.
  auto progress = reader.on_bytes(buffer);
  while (progress == response_reader::progress::need_more) {
    if (std::chrono::steady_clock::now() >= deadline) {
      reader.on_deadline();
      break;
    }
    std::tuple<error_code, std::size_t> outcome;
    if constexpr (is_plain<Stream>) {
      outcome = co_await stream.async_read_some(buffer.prepare(read_chunk), use_tuple);
    } else {
      outcome = co_await stream.read_some(buffer.prepare(read_chunk));
    }
    auto [read_ec, bytes] = outcome;
    buffer.commit(bytes);
    if (bytes > 0) {
      lifecycle.on_response_byte();
      progress = reader.on_bytes(buffer);
    }
    if (progress == response_reader::progress::done) break;
    if (read_ec) {
      if (deadline_passed) {
        reader.on_deadline();
      } else {
        reader.on_end(read_ec);
      }
      break;
    }
  }
  out.status = reader.status();
  out.error = reader.error();
  out.detail = reader.detail();
  out.retry_after = reader.retry_after();
  out.quota = reader.take_quota();
  out.body_prefix = reader.body_prefix();
  if (reader.status() == 0) {
    lifecycle.on_failure();
    co_return;
  }
  auto end = reader.end(buffer);
  end.early = early;
  lifecycle.on_response_complete(end);
}

}  // namespace

asio::awaitable<http_result> http_client::send(const proto::target& target,
                                               std::string_view request, write_gate* gate,
                                               std::shared_ptr<const client_identity> identity,
                                               const egress_proxy* proxy) {
  // The clock is read at the start, after a wait at the gate and after the exchange: each
  // reading serves every decision until the next (about 30 ns a reading, several per request
  // otherwise).
  auto now = std::chrono::steady_clock::now();
  auto deadline = now + config_.attempt_timeout;
  http_result result;
  auto& pool = origin_for(target, identity, proxy);

  // Two tries at most: the lifecycle retries only a reused connection's failure, and the retry
  // opens a new one (a server that closed one idle connection has often closed the others too).
  for (;;) {
    connection_ptr conn;
    std::vector<connection_ptr> expired;
    while (auto reused = result.fresh_retry ? std::nullopt : pool.idle.take(now, expired)) {
      // Bytes or an EOF that arrived while the connection sat idle answer no request of ours:
      // the next request would read them as its response.
      (*reused)->lifecycle.on_idle_check(input_pending((*reused)->view(), true));
      if ((*reused)->lifecycle.phase() == connection_phase::idle) {
        conn = std::move(*reused);
        break;
      }
      expired.push_back(std::move(*reused));
    }
    for (auto& stale : expired) close(std::move(stale));

    if (conn) {
      result.reused_connection = true;
    } else {
      result.reused_connection = false;
      conn = co_await open(target, pool, deadline, result);
      if (!conn) {
        // On the fresh retry the first try's request may have gone out: its failure stands as
        // the partner's.
        if (result.fresh_retry) result.out_of_descriptors = false;
        co_return result;
      }
      now = std::chrono::steady_clock::now();
    }

    if (gate) {
      auto go = gate->decide_now(!result.reused_connection, now);
      if (!go) {
        const auto asked = now;
        go = co_await gate->wait(!result.reused_connection);
        now = std::chrono::steady_clock::now();
        // Waiting to be let through is not the endpoint's time: the deadline moves by as much.
        deadline += now - asked;
      }
      if (!*go) {
        // Another new connection may bring the origin's session instead.
        end_handshake_turn(pool, *conn, false, now);
        // Nothing was written, so the connection is as good as it was.
        park(pool, std::move(conn), now);
        // On the fresh retry, the first try's failure stands.
        result.not_sent = !result.fresh_retry;
        co_return result;
      }
    }

    const auto exchange_began = now;
    // The exchange runs in this frame's callee directly: a coroutine in between to pick the
    // stream type would be one more frame allocated and freed per request.
    {
      exchange_watch watch(*this, *conn, deadline);
      if (!conn->tls) {
        co_await run_exchange(conn->stream.socket(), conn->lowest(), conn->view(), conn->buffer,
                              conn->lifecycle, request, deadline, conn->deadline_passed, config_,
                              result);
      } else {
        co_await run_exchange(*conn->tls, conn->lowest(), conn->view(), conn->buffer,
                              conn->lifecycle, request, deadline, conn->deadline_passed, config_,
                              result);
      }
    }
    now = std::chrono::steady_clock::now();
    result.exchange_time = now - exchange_began;
    // Its first response brought the origin's TLS 1.3 tickets, if the origin gives any; an
    // exchange that read no response says nothing of them, and another connect may try.
    end_handshake_turn(pool, *conn, result.status != 0, now);
    if (conn->lifecycle.retry_on_fresh_connection(now, deadline)) {
      close(std::move(conn));
      // Only the failure stands until the retry answers: nothing else of this try was a response.
      result.fresh_retry = true;
      result.status = 0;
      result.retry_after.clear();
      result.quota.clear();
      result.body_prefix.clear();
      continue;
    }
    if (conn->lifecycle.phase() == connection_phase::idle) {
      park(pool, std::move(conn), now);
    } else {
      close(std::move(conn));
    }
    co_return result;
  }
}

}  // namespace surge::engine
