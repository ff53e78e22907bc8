// TLS on the socket itself (engine/net/tls_socket.hpp) against a peer that resets the
// connection: OpenSSL's socket BIO writes with write(), which raises SIGPIPE on a reset
// connection; the writes must come back as errors and the process live on.
#include "engine/net/tls_socket.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <sys/socket.h>

#include "engine/net/tls_sessions.hpp"

namespace surge::engine {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

TEST(TlsSocket, WritesToAConnectionThePeerResetFailWithoutKillingTheProcess) {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  tcp::socket client(io);
  client.connect(acceptor.local_endpoint());
  {
    // Accepted, then closed with RST (linger 0): nothing is ever read.
    tcp::socket peer = acceptor.accept();
    peer.set_option(asio::socket_base::linger(true, 0));
    peer.close();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the RST arrives

  const auto context = make_client_tls_context(http_client_config{});
  std::vector<error_code> errors;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        const char data[256] = {};
        // A new TLS object each time, so that each write reaches the socket (its ClientHello):
        // the first meets the reset (ECONNRESET), the next ones a closed pipe (EPIPE).
        for (int i = 0; i < 3; ++i) {
          tls_socket tls(client, context->native_handle());
          auto [ec, n] = co_await tls.write_some(asio::buffer(data));
          errors.push_back(ec);
        }
      },
      asio::detached);
  io.run();
  ASSERT_EQ(errors.size(), 3u);
  for (const auto& ec : errors) EXPECT_TRUE(ec) << "a write to a reset connection succeeded";
}

}  // namespace
}  // namespace surge::engine
