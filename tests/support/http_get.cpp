#include "tests/support/http_get.hpp"

#include <chrono>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

namespace surge::testing {

http_reply http_get(std::uint16_t port, const std::string& target, const std::string& host) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  boost::asio::io_context io;
  beast::tcp_stream stream(io);
  stream.expires_after(std::chrono::seconds(5));
  boost::system::error_code ec;
  stream.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address(host), port), ec);
  if (ec) return {};
  http::request<http::string_body> request{http::verb::get, target, 11};
  request.set(http::field::host, host);
  request.keep_alive(false);
  http::write(stream, request, ec);
  if (ec) return {};
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  http::read(stream, buffer, response, ec);
  if (ec) return {};
  return {static_cast<int>(response.result_int()), response.body()};
}

}  // namespace surge::testing
