// TLS on the socket itself (engine/net/tls_socket.hpp): against a peer that resets the
// connection (OpenSSL's socket BIO writes with write(), which raises SIGPIPE on a reset
// connection; the writes must come back as errors and the process live on), and the system
// calls a response costs, against a real OpenSSL server on loopback.
#include "engine/net/tls_socket.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include "engine/net/tls_sessions.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_pki.hpp"

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

// The read system calls this thread has made so far (read(2) and the like, sockets included).
long reads_so_far() {
  std::ifstream io("/proc/thread-self/io");
  std::string key;
  long value = 0;
  while (io >> key >> value) {
    if (key == "syscr:") return value;
  }
  return -1;
}

TEST(TlsSocket, AResponseInOneRecordIsReadWithOneSystemCall) {
  // OpenSSL reads a record's 5-byte header and then its body, two read() calls, unless it may
  // read ahead: then one call takes what the kernel holds. Every response pays it, a few
  // microseconds of a delivery's CPU.
  testing::temp_dir dir;
  const auto pki = testing::make_test_pki(dir.path());
  SSL_CTX* server_context = SSL_CTX_new(TLS_server_method());
  ASSERT_EQ(SSL_CTX_use_certificate_chain_file(server_context, pki.server_cert.c_str()), 1);
  ASSERT_EQ(SSL_CTX_use_PrivateKey_file(server_context, pki.server_key.c_str(), SSL_FILETYPE_PEM),
            1);
  SSL_CTX_set_num_tickets(server_context, 0);  // the response is the only record to read

  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  std::promise<void> answered;
  std::thread server([&] {
    // A blocking OpenSSL server: the handshake, one request read, one response in one record.
    tcp::socket peer = acceptor.accept();
    SSL* ssl = SSL_new(server_context);
    SSL_set_fd(ssl, static_cast<int>(peer.native_handle()));
    if (SSL_accept(ssl) == 1) {
      char request[256];
      if (SSL_read(ssl, request, sizeof request) > 0) {
        const std::string response(600, 'r');
        SSL_write(ssl, response.data(), static_cast<int>(response.size()));
      }
    }
    answered.set_value();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the client reads first
    SSL_free(ssl);
  });

  http_client_config config;
  config.ca_file = pki.ca_cert;
  const auto context = make_client_tls_context(config);
  tcp::socket client(io);
  client.connect(acceptor.local_endpoint());
  long reads = -1;
  std::size_t received = 0;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        tls_socket tls(client, context->native_handle());
        if (co_await tls.handshake()) co_return;
        const std::string request = "one request";
        auto [write_ec, written] = co_await tls.write_some(asio::buffer(request));
        if (write_ec) co_return;
        // The whole record is in the kernel's buffer before the read begins.
        answered.get_future().wait();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        char response[4096];
        // Reading the count costs reads of its own: measured first, then taken off.
        const long calibration = reads_so_far();
        const long own = reads_so_far() - calibration;
        const long before = reads_so_far();
        auto [read_ec, n] = co_await tls.read_some(asio::buffer(response));
        reads = reads_so_far() - before - own;
        received = read_ec ? 0 : n;
      },
      asio::detached);
  io.run();
  server.join();
  SSL_CTX_free(server_context);
  EXPECT_EQ(received, 600u);
  EXPECT_EQ(reads, 1);
}

}  // namespace
}  // namespace surge::engine
