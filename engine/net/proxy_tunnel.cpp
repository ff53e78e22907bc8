#include "engine/net/proxy_tunnel.hpp"

#include <tuple>

#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>

#include "engine/awaiting.hpp"
#include "engine/net/http_client_support.hpp"

namespace surge::engine {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using proto::transport_error;

namespace {

// A proxy's answer to CONNECT is a status line and a few header lines.
constexpr std::uint32_t max_proxy_answer_header = 8 * 1024;

std::string authority(const tcp::endpoint& endpoint) {
  const auto address = endpoint.address().to_string();
  const auto host = endpoint.address().is_v6() ? "[" + address + "]" : address;
  return host + ":" + std::to_string(endpoint.port());
}

bool timed_out(const boost::system::error_code& ec) {
  return ec == beast::error::timeout || ec == asio::error::timed_out;
}

}  // namespace

std::string connect_request(const tcp::endpoint& target) {
  const auto where = authority(target);
  return "CONNECT " + where + " HTTP/1.1\r\nHost: " + where + "\r\n\r\n";
}

asio::awaitable<std::optional<tunnel_failure>> open_proxy_tunnel(
    beast::tcp_stream& stream, const std::vector<tcp::endpoint>& proxy,
    const std::string& proxy_name, const tcp::endpoint& target, const std::string& target_host) {
  // Opened first so that a socket the process cannot have fails as such (engine/net/
  // http_connect.cpp says why).
  boost::system::error_code connect_ec;
  stream.socket().open(proxy.front().protocol(), connect_ec);
  if (connect_ec) {
    const bool no_descriptor = detail::out_of_descriptors(connect_ec);
    co_return tunnel_failure{
        transport_error::connect,
        no_descriptor
            ? "no file descriptor free to connect to proxy " + proxy_name + " (" +
                  connect_ec.message() + "): the drain's file limit or the system's is reached"
            : "opening a socket to proxy " + proxy_name + ": " + connect_ec.message(),
        true, no_descriptor};
  }
  std::tie(connect_ec, std::ignore) = co_await stream.async_connect(proxy, awaitable_tuple);
  if (connect_ec) {
    co_return tunnel_failure{
        timed_out(connect_ec) ? transport_error::connect_timeout : transport_error::connect,
        "connecting to proxy " + proxy_name + ": " + connect_ec.message(), true};
  }
  boost::system::error_code ignored;
  stream.socket().set_option(tcp::no_delay(true), ignored);

  const auto request = connect_request(target);
  auto [write_ec, written] =
      co_await asio::async_write(stream, asio::buffer(request), awaitable_tuple);
  beast::flat_buffer buffer;
  http::response_parser<http::empty_body> answer;
  answer.header_limit(max_proxy_answer_header);
  boost::system::error_code read_ec = write_ec;
  if (!read_ec) {
    auto [ec, n] = co_await http::async_read_header(stream, buffer, answer, awaitable_tuple);
    read_ec = ec;
  }
  const auto via = " to " + authority(target) + " (" + target_host + ")";
  if (read_ec) {
    co_return tunnel_failure{
        timed_out(read_ec) ? transport_error::connect_timeout : transport_error::connect,
        "proxy " + proxy_name + " did not answer CONNECT" + via + ": " + read_ec.message(), true};
  }
  const auto status = answer.get().result_int();
  if (status / 100 != 2) {
    const auto reason = std::string(answer.get().reason());
    co_return tunnel_failure{transport_error::connect,
                             "proxy " + proxy_name + " refused CONNECT" + via + ": " +
                                 std::to_string(status) + (reason.empty() ? "" : " " + reason),
                             false};
  }
  if (buffer.size() != 0) {
    // The partner speaks only after our request (or ClientHello): bytes already here are the
    // proxy's, not the partner's, and would be read as a response.
    co_return tunnel_failure{transport_error::connect,
                             "proxy " + proxy_name + " sent bytes after its CONNECT answer" + via,
                             true};
  }
  co_return std::nullopt;
}

}  // namespace surge::engine
