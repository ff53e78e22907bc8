#pragma once
// TLS on a connected socket, with OpenSSL reading and writing the descriptor itself: the
// socket is non-blocking, and an operation OpenSSL cannot finish waits for the socket to be
// ready (the reactor's epoll) and is tried again. Boost.Asio's ssl::stream puts a BIO pair and
// two record buffers of its own between OpenSSL and the socket, about 70 KB per connection
// held for as long as it is open and two more copies of every record; here an open connection
// holds only the SSL object, and OpenSSL's record buffers while a record is under way
// (SSL_MODE_RELEASE_BUFFERS), reading ahead so that a response costs one read(). Not
// thread-safe: each connection lives on one shard.
#include <cstddef>
#include <tuple>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>
#include <openssl/ssl.h>

namespace surge::engine {

class tls_socket {
 public:
  // A client SSL object from `context`, on `socket`'s descriptor (which it never closes), and
  // the socket made non-blocking. Throws std::runtime_error when OpenSSL cannot make one.
  tls_socket(boost::asio::ip::tcp::socket& socket, SSL_CTX* context);
  ~tls_socket();
  tls_socket(const tls_socket&) = delete;
  tls_socket& operator=(const tls_socket&) = delete;

  SSL* native_handle() const { return ssl_; }

  // Each ends when OpenSSL is done or the socket's wait ends in an error (the caller's
  // deadline shuts the socket down and cancels its waits). Errors read as Asio's TLS stream
  // reports them: asio::error::eof after close_notify, ssl::error::stream_truncated for an end
  // without it, the OpenSSL error otherwise.
  boost::asio::awaitable<boost::system::error_code> handshake();
  boost::asio::awaitable<std::tuple<boost::system::error_code, std::size_t>> write_some(
      boost::asio::const_buffer data);
  boost::asio::awaitable<std::tuple<boost::system::error_code, std::size_t>> read_some(
      boost::asio::mutable_buffer into);

 private:
  enum class next { done, wait_read, wait_write };
  // What OpenSSL's result `ret` of the call just made asks for; `ec` set when done with an
  // error.
  next after(int ret, boost::system::error_code& ec);
  boost::asio::awaitable<boost::system::error_code> wait(next what);
  template <class Call>
  boost::asio::awaitable<std::tuple<boost::system::error_code, std::size_t>> until_done(Call call);

  boost::asio::ip::tcp::socket& socket_;
  SSL* ssl_ = nullptr;
};

}  // namespace surge::engine
