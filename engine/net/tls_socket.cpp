#include "engine/net/tls_socket.hpp"

#include <cerrno>
#include <stdexcept>

#include <boost/asio/ssl/error.hpp>
#include <openssl/err.h>

#include "engine/awaiting.hpp"

namespace surge::engine {

namespace asio = boost::asio;
using boost::system::error_code;
using tcp = asio::ip::tcp;

tls_socket::tls_socket(tcp::socket& socket, SSL_CTX* context)
    : socket_(socket), ssl_(SSL_new(context)) {
  if (ssl_ == nullptr) throw std::runtime_error("cannot make a TLS connection object");
  error_code ignored;
  socket_.non_blocking(true, ignored);
  // A socket BIO that leaves the descriptor to the socket (BIO_NOCLOSE).
  SSL_set_fd(ssl_, static_cast<int>(socket_.native_handle()));
  SSL_set_connect_state(ssl_);
  SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                         SSL_MODE_RELEASE_BUFFERS);
}

tls_socket::~tls_socket() { SSL_free(ssl_); }

tls_socket::next tls_socket::after(int ret, error_code& ec) {
  if (ret > 0) return next::done;
  const int reason = SSL_get_error(ssl_, ret);
  switch (reason) {
    case SSL_ERROR_WANT_READ: return next::wait_read;
    case SSL_ERROR_WANT_WRITE: return next::wait_write;
    case SSL_ERROR_ZERO_RETURN: ec = asio::error::eof; return next::done;
    case SSL_ERROR_SYSCALL:
      ec = errno != 0 ? error_code(errno, asio::error::get_system_category())
                      : error_code(asio::ssl::error::stream_truncated);
      return next::done;
    default: {
      const auto code = ERR_get_error();
      ec = ERR_GET_REASON(code) == SSL_R_UNEXPECTED_EOF_WHILE_READING
               ? error_code(asio::ssl::error::stream_truncated)
               : error_code(static_cast<int>(code), asio::error::get_ssl_category());
      return next::done;
    }
  }
}

asio::awaitable<error_code> tls_socket::wait(next what) {
  auto [ec] = co_await socket_.async_wait(
      what == next::wait_read ? tcp::socket::wait_read : tcp::socket::wait_write, use_tuple);
  co_return ec;
}

asio::awaitable<error_code> tls_socket::handshake() {
  for (;;) {
    ERR_clear_error();
    errno = 0;
    error_code ec;
    const auto what = after(SSL_do_handshake(ssl_), ec);
    if (what == next::done) co_return ec;
    if (auto waited = co_await wait(what)) co_return waited;
  }
}

asio::awaitable<std::tuple<error_code, std::size_t>> tls_socket::write_some(
    asio::const_buffer data) {
  for (;;) {
    ERR_clear_error();
    errno = 0;
    std::size_t written = 0;
    error_code ec;
    const auto what = after(SSL_write_ex(ssl_, data.data(), data.size(), &written), ec);
    if (what == next::done) co_return std::tuple{ec, written};
    if (auto waited = co_await wait(what)) co_return std::tuple{waited, std::size_t{0}};
  }
}

asio::awaitable<std::tuple<error_code, std::size_t>> tls_socket::read_some(
    asio::mutable_buffer into) {
  for (;;) {
    ERR_clear_error();
    errno = 0;
    std::size_t read = 0;
    error_code ec;
    const auto what = after(SSL_read_ex(ssl_, into.data(), into.size(), &read), ec);
    if (what == next::done) co_return std::tuple{ec, read};
    if (auto waited = co_await wait(what)) co_return std::tuple{waited, std::size_t{0}};
  }
}

}  // namespace surge::engine
