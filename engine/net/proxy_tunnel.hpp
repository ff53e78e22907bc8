#pragma once
// Leaving through an egress proxy: a TCP connection to the proxy, then HTTP CONNECT to an
// address of the partner that the target policy already checked (an IP literal, never a name
// the proxy would resolve again: the SSRF rules hold for the final target whatever the proxy's
// DNS says). HTTPS and plain HTTP both go through the tunnel; TLS runs end to end inside it.
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/tcp_stream.hpp>

#include "proto/outcome.hpp"

namespace surge::engine {

struct tunnel_failure {
  proto::transport_error error = proto::transport_error::connect;
  std::string detail;
  // The proxy itself could not be reached or did not answer: trying another address of the
  // partner through it would fail the same way.
  bool proxy_unreachable = false;
  // No file descriptor was free for the connection to the proxy (http_result's flag).
  bool out_of_descriptors = false;
};

// The request line and header asking a proxy for a tunnel to `target`.
std::string connect_request(const boost::asio::ip::tcp::endpoint& target);

// Connects `stream` to one of `proxy` (named `proxy_name` in errors) and asks for a tunnel to
// `target`, within the stream's expiry, which the caller set. Nullopt: the tunnel is open and
// `stream` now reaches `target` (named `target_host` in errors).
boost::asio::awaitable<std::optional<tunnel_failure>> open_proxy_tunnel(
    boost::beast::tcp_stream& stream, const std::vector<boost::asio::ip::tcp::endpoint>& proxy,
    const std::string& proxy_name, const boost::asio::ip::tcp::endpoint& target,
    const std::string& target_host);

}  // namespace surge::engine
