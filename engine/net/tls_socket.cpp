#include "engine/net/tls_socket.hpp"

#include <cerrno>
#include <csignal>
#include <mutex>
#include <stdexcept>

#include <boost/asio/ssl/error.hpp>
#include <openssl/err.h>

#include "engine/awaiting.hpp"

namespace surge::engine {

namespace asio = boost::asio;
using boost::system::error_code;
using tcp = asio::ip::tcp;

namespace {

// OpenSSL's socket BIO writes with write(), not send(MSG_NOSIGNAL) as Asio does: a write to a
// connection the partner reset would raise SIGPIPE and end the process. It is ignored, once,
// for the whole process (EPIPE then comes back as an error like any other).
std::once_flag sigpipe_once;

}  // namespace

tls_socket::tls_socket(tcp::socket& socket, SSL_CTX* context)
    : socket_(socket), ssl_(SSL_new(context)) {
  std::call_once(sigpipe_once, [] { std::signal(SIGPIPE, SIG_IGN); });
  if (ssl_ == nullptr) throw std::runtime_error("cannot make a TLS connection object");
  error_code ignored;
  socket_.non_blocking(true, ignored);
  // A socket BIO that leaves the descriptor to the socket (BIO_NOCLOSE).
  if (SSL_set_fd(ssl_, static_cast<int>(socket_.native_handle())) != 1) {
    SSL_free(ssl_);
    throw std::runtime_error("cannot put TLS on the connection's socket");
  }
  SSL_set_connect_state(ssl_);
  SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                         SSL_MODE_RELEASE_BUFFERS);
  // One read() takes what the kernel holds, instead of each record's 5-byte header and then its
  // body: a read system call fewer per response. What it reads beyond the record stays in
  // OpenSSL's buffer, where the idle check looks too (SSL_has_pending).
  SSL_set_read_ahead(ssl_, 1);
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
      if (code == 0) {
        // A failure OpenSSL gave no reason for: still a failure.
        ec = error_code(EPROTO, asio::error::get_system_category());
      } else if (ERR_GET_LIB(code) == ERR_LIB_SSL &&
                 ERR_GET_REASON(code) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
        ec = asio::ssl::error::stream_truncated;
      } else {
        ec = error_code(static_cast<int>(code), asio::error::get_ssl_category());
      }
      return next::done;
    }
  }
}

asio::awaitable<error_code> tls_socket::wait(next what) {
  auto [ec] = co_await socket_.async_wait(
      what == next::wait_read ? tcp::socket::wait_read : tcp::socket::wait_write, use_tuple);
  co_return ec;
}

// Calls `call` (an OpenSSL operation, given where to put the bytes it moved) until OpenSSL is
// done, waiting for the socket as it asks in between.
template <class Call>
asio::awaitable<std::tuple<error_code, std::size_t>> tls_socket::until_done(Call call) {
  for (;;) {
    ERR_clear_error();
    errno = 0;
    std::size_t moved = 0;
    error_code ec;
    const auto what = after(call(moved), ec);
    if (what == next::done) co_return std::tuple{ec, moved};
    if (auto waited = co_await wait(what)) co_return std::tuple{waited, std::size_t{0}};
  }
}

asio::awaitable<error_code> tls_socket::handshake() {
  auto [ec, ignored] = co_await until_done([this](std::size_t&) { return SSL_do_handshake(ssl_); });
  co_return ec;
}

asio::awaitable<std::tuple<error_code, std::size_t>> tls_socket::write_some(
    asio::const_buffer data) {
  return until_done([this, data](std::size_t& written) {
    return SSL_write_ex(ssl_, data.data(), data.size(), &written);
  });
}

asio::awaitable<std::tuple<error_code, std::size_t>> tls_socket::read_some(
    asio::mutable_buffer into) {
  return until_done([this, into](std::size_t& read) {
    return SSL_read_ex(ssl_, into.data(), into.size(), &read);
  });
}

}  // namespace surge::engine
