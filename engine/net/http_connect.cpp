// Opening a connection for the client: the target resolved once (engine/net/dns_resolver.hpp),
// every address checked before any is connected to, TCP_NODELAY, and over TLS SNI, hostname
// verification and a resumed session where the origin gave one.
#include "engine/net/http_client.hpp"
#include "engine/net/http_client_support.hpp"
#include "engine/net/proxy_tunnel.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

namespace surge::engine {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using detail::count;
using detail::is_timeout;
using detail::out_of_descriptors;
using proto::transport_error;

namespace {

proto::ip_address to_proto_address(const asio::ip::address& address) {
  proto::ip_address out;
  if (address.is_v4()) {
    const auto bytes = address.to_v4().to_bytes();
    std::copy(bytes.begin(), bytes.end(), out.bytes.begin());
  } else {
    out.v6 = true;
    const auto bytes = address.to_v6().to_bytes();
    std::copy(bytes.begin(), bytes.end(), out.bytes.begin());
  }
  return out;
}

asio::ip::address to_asio_address(const proto::ip_address& address) {
  if (!address.v6) {
    asio::ip::address_v4::bytes_type bytes;
    std::copy_n(address.bytes.begin(), bytes.size(), bytes.begin());
    return asio::ip::address_v4(bytes);
  }
  asio::ip::address_v6::bytes_type bytes;
  std::copy_n(address.bytes.begin(), bytes.size(), bytes.begin());
  return asio::ip::address_v6(bytes);
}

// Each address in turn, on a socket opened for it here: a socket the process cannot have then
// fails as such, where Asio's connect over a range closes and reopens the socket itself and
// reports a failed reopen as an aborted operation. Out of descriptors, `make_room` (closing an
// idle connection; false when there is none) gives the same address one more try. The stream's
// expiry is the deadline for all of them.
template <class MakeRoom>
asio::awaitable<error_code> connect_directly(beast::tcp_stream& stream,
                                             const std::vector<tcp::endpoint>& addresses,
                                             MakeRoom make_room) {
  error_code ec;
  bool room_made = false;
  for (std::size_t next = 0; next < addresses.size();) {
    error_code ignored;
    stream.socket().close(ignored);
    ec = {};
    stream.socket().open(addresses[next].protocol(), ec);
    if (!ec) std::tie(ec) = co_await stream.async_connect(addresses[next], awaitable_tuple);
    if (!ec) co_return ec;
    if (out_of_descriptors(ec)) {
      if (room_made || !make_room()) co_return ec;
      room_made = true;
      continue;
    }
    if (is_timeout(ec)) co_return ec;
    ++next;
  }
  co_return ec;
}

// Through `proxy`: a tunnel to the first of `allowed` the proxy connects to. Nullopt with the
// failure in `result`.
asio::awaitable<std::optional<beast::tcp_stream>> connect_through_proxy(
    const egress_proxy& proxy, dns_resolver& resolver, const asio::any_io_executor& executor,
    const std::vector<tcp::endpoint>& allowed, const std::string& target_host,
    steady_time connect_deadline, http_result& result) {
  const auto proxy_name =
      (proxy.host.find(':') != std::string::npos ? "[" + proxy.host + "]" : proxy.host) + ":" +
      std::to_string(proxy.port);
  std::vector<tcp::endpoint> proxy_endpoints;
  error_code ec;
  if (auto literal = asio::ip::make_address(proxy.host, ec); !ec) {
    proxy_endpoints.emplace_back(literal, proxy.port);
  } else {
    auto looked_up = co_await resolver.resolve(proxy.host, connect_deadline);
    if (looked_up.timed_out || looked_up.answer.addresses.empty()) {
      result.error = transport_error::resolve;
      result.detail = "resolving proxy " + proxy.host +
                      (looked_up.timed_out ? " timed out" : ": " + looked_up.answer.error);
      co_return std::nullopt;
    }
    for (const auto& address : looked_up.answer.addresses) {
      proxy_endpoints.emplace_back(to_asio_address(address), proxy.port);
    }
  }
  // Each checked address of the partner in turn, on a new connection to the proxy (a proxy
  // that refused one usually closes), until a tunnel opens or the proxy cannot be reached.
  for (const auto& endpoint : allowed) {
    beast::tcp_stream attempt(executor);
    attempt.expires_at(connect_deadline);
    auto failure =
        co_await open_proxy_tunnel(attempt, proxy_endpoints, proxy_name, endpoint, target_host);
    if (!failure) co_return std::optional<beast::tcp_stream>(std::move(attempt));
    result.error = failure->error;
    result.detail = std::move(failure->detail);
    result.out_of_descriptors = failure->out_of_descriptors;
    if (failure->proxy_unreachable) break;
  }
  co_return std::nullopt;
}

}  // namespace

asio::awaitable<http_client::connection_ptr> http_client::open(const proto::target& target,
                                                               origin_pool& pool,
                                                               steady_time deadline,
                                                               http_result& result) {
  const auto connect_deadline =
      std::min(deadline, std::chrono::steady_clock::now() + config_.connect_timeout);

  std::vector<proto::ip_address> resolved;
  error_code ec;
  if (auto literal = asio::ip::make_address(target.host, ec); !ec) {
    resolved.push_back(to_proto_address(literal));
  } else {
    auto looked_up = co_await resolver_.resolve(target.host, connect_deadline);
    if (looked_up.timed_out) {
      result.error = transport_error::resolve;
      result.detail = "resolving " + target.host + " timed out";
      co_return nullptr;
    }
    if (looked_up.answer.addresses.empty()) {
      result.error = transport_error::resolve;
      result.detail = "resolving " + target.host + ": " + looked_up.answer.error;
      co_return nullptr;
    }
    resolved = std::move(looked_up.answer.addresses);
  }

  // Every resolved address is checked and only checked ones are connected to: no second lookup
  // can swap in an internal address (DNS rebinding).
  std::vector<tcp::endpoint> allowed;
  std::string refused;
  for (const auto& address : resolved) {
    const auto kind = proto::classify_address(address);
    const auto in_allowed_range = [&] {
      for (const auto& range : config_.allowed_target_ranges) {
        if (range.contains(address)) return true;
      }
      return false;
    };
    if (kind == proto::address_class::public_routable || config_.allow_private_targets ||
        in_allowed_range()) {
      allowed.emplace_back(to_asio_address(address), target.port);
    } else if (refused.empty()) {
      refused =
          to_asio_address(address).to_string() + " (" + std::string(proto::to_string(kind)) + ")";
    }
  }
  if (allowed.empty()) {
    result.error = transport_error::refused_target;
    result.detail =
        refused.empty() ? "no address for " + target.host : "refused non-public address " + refused;
    co_return nullptr;
  }

  make_room_for_a_connection();
  // Counted while the connect holds its socket, and taken off when it resumes rather than by a
  // destructor: a frame the io_context destroys at shutdown, after the client, must not touch
  // the client. An exception takes it off on its way out.
  ++connecting_;
  bool connecting = true;
  const auto connect_ended = [&] {
    if (connecting) --connecting_;
    connecting = false;
  };
  std::optional<beast::tcp_stream> connected;
  try {
    if (pool.proxy) {
      auto tunnel = co_await connect_through_proxy(*pool.proxy, resolver_, executor_, allowed,
                                                   target.host, connect_deadline, result);
      connect_ended();
      if (!tunnel) co_return nullptr;
      connected.emplace(std::move(*tunnel));
    } else {
      connected.emplace(executor_);
      connected->expires_at(connect_deadline);
      const auto failed =
          co_await connect_directly(*connected, allowed, [this] { return close_longest_idle(); });
      connect_ended();
      if (failed) {
        const bool no_descriptor = out_of_descriptors(failed);
        result.error =
            is_timeout(failed) ? transport_error::connect_timeout : transport_error::connect;
        result.detail = no_descriptor ? "no file descriptor free to connect to " + target.host +
                                            " (" + failed.message() +
                                            "): the drain's file limit or the system's is reached"
                                      : "connecting to " + target.host + ": " + failed.message();
        result.out_of_descriptors = no_descriptor;
        co_return nullptr;
      }
    }
  } catch (...) {
    connect_ended();
    throw;
  }
  auto& stream = *connected;
  stream.socket().set_option(tcp::no_delay(true), ec);
  count(counters_.open_connections, 1);
  ++connections_;

  if (!target.tls) {
    auto conn = std::make_unique<pooled_connection>(std::move(stream));
    conn->lifecycle.on_connected();
    co_return conn;
  }

  auto conn = std::make_unique<pooled_connection>(std::move(stream));
  try {
    conn->tls.emplace(conn->stream.socket(),
                      (pool.identity ? *pool.identity->context : *tls_).native_handle());
  } catch (const std::exception& error) {
    result.error = transport_error::tls;
    result.detail = error.what();
    close(std::move(conn));
    co_return nullptr;
  }
  SSL* ssl_handle = conn->tls->native_handle();
  // The certificate must name the URL's host (OpenSSL's RFC 6125 check, no partial
  // wildcards), or its address when the URL gives one; SNI carries a name only.
  error_code literal_ec;
  asio::ip::make_address(target.host, literal_ec);
  const bool named = literal_ec ? SSL_set_tlsext_host_name(ssl_handle, target.host.c_str()) == 1 &&
                                      SSL_set1_host(ssl_handle, target.host.c_str()) == 1
                                : X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_handle),
                                                                target.host.c_str()) == 1;
  if (!named) {
    result.error = transport_error::tls;
    result.detail = "cannot set the TLS server name " + target.host;
    close(std::move(conn));
    co_return nullptr;
  }
  SSL_set_hostflags(ssl_handle, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  // One full handshake per origin at a time while none of its sessions is here; the other new
  // connections wait for the session it brings, then resume (engine/net/handshake_gate.hpp).
  for (;;) {
    const auto decision =
        pool.gate.on_connect(sessions_.has(pool.sessions.origin_key, std::time(nullptr)),
                             std::chrono::steady_clock::now());
    if (decision.what == first_handshake_gate::step::full_for_all) {
      conn->handshake_turn = decision.turn;
    }
    if (decision.what != first_handshake_gate::step::wait) break;
    // At the connect deadline it goes on with a full handshake of its own.
    if (!co_await wait_for_session(pool, connect_deadline)) break;
  }
  prepare_resumption(ssl_handle, pool.sessions);
  error_code handshake_ec;
  {
    // The client's deadline timer ends the handshake's waits at the attempt deadline.
    exchange_watch watch(*this, *conn, deadline);
    handshake_ec = co_await conn->tls->handshake();
  }
  // Done just as the deadline shut the socket down: as late as a failure.
  if (!handshake_ec && conn->deadline_passed) handshake_ec = asio::error::timed_out;
  if (handshake_ec) {
    result.error = is_timeout(handshake_ec) || conn->deadline_passed ? transport_error::timeout
                                                                     : transport_error::tls;
    result.detail =
        "TLS handshake with " + target.host + ": " +
        (conn->deadline_passed ? "the attempt deadline passed" : handshake_ec.message());
    if (const auto verified = SSL_get_verify_result(ssl_handle); verified != X509_V_OK) {
      result.detail += std::string(" (") + X509_verify_cert_error_string(verified) + ")";
    }
    // Whatever this origin gave before is not offered again: the next try starts afresh.
    sessions_.forget(pool.sessions.origin_key);
    end_handshake_turn(pool, *conn, false, std::chrono::steady_clock::now());
    close(std::move(conn));
    co_return nullptr;
  }
  count(SSL_session_reused(ssl_handle) == 1 ? counters_.tls_resumed_handshakes
                                            : counters_.tls_full_handshakes,
        1);
  conn->lifecycle.on_connected();
  co_return conn;
}

}  // namespace surge::engine
