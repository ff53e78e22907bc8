#pragma once
// One connection of the sink and the unusual ways it answers: a byte at a time, bodies it
// streams from a fixed buffer (endless, or shorter than announced), holding the socket open,
// and the close after the last answer. Templates over the plain and the TLS stream.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>

#include "tools/sink/recorder.hpp"
#include "tools/sink/request_handler.hpp"

// Private to tools/sink/: sink_server.cpp is the one user.
namespace surge::sink::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;

inline constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
inline constexpr auto write_timeout = std::chrono::seconds(10);
// After a 413 the client may still be sending its body; closing at once would turn the answer
// into a reset, so unread input is drained this long first.
inline constexpr auto lingering_close = std::chrono::seconds(1);

using tls_stream = ssl::stream<beast::tcp_stream>;

template <class Stream>
constexpr bool is_tls = std::is_same_v<Stream, tls_stream>;

// One request being answered, for `delay_per_request`: counts itself in for its lifetime.
struct answering_count {
  explicit answering_count(std::atomic<int>& counter) : load(++counter), counter_(counter) {}
  ~answering_count() { --counter_; }
  answering_count(const answering_count&) = delete;
  answering_count& operator=(const answering_count&) = delete;

  const int load;  // requests being answered when this one arrived, itself included

 private:
  std::atomic<int>& counter_;
};

template <class Stream>
struct connection {
  template <class... Args>
  connection(std::uint64_t connection_id, const asio::any_io_executor& executor, Args&&... args)
      : stream(std::forward<Args>(args)...), delay(executor), id(connection_id) {}

  Stream stream;
  asio::steady_timer delay;
  std::uint64_t id;
  std::string sni;  // the server name the TLS client asked for
  // Set by close_now(): a read that completed just before the close must not start a delay.
  bool closed = false;
};

// Reads and discards until the peer closes (or stop() closes the socket).
template <class Stream>
asio::awaitable<void> hold_open(Stream& stream) {
  beast::get_lowest_layer(stream).expires_never();
  std::array<char, 1024> discard;
  for (;;) {
    auto [ec, n] = co_await stream.async_read_some(asio::buffer(discard), use_tuple);
    if (ec) co_return;
  }
}

// The whole response, one byte per `answer.trickle`: a server (or a middlebox) that is alive
// but slower than any deadline. False when the client went away.
template <class Stream>
asio::awaitable<bool> trickle_answer(connection<Stream>& conn, const reply& answer) {
  std::ostringstream text;
  text << answer.response;
  const std::string bytes = text.str();
  auto& lowest = beast::get_lowest_layer(conn.stream);
  for (const char byte : bytes) {
    lowest.expires_after(write_timeout);
    auto [write_error, written] =
        co_await asio::async_write(conn.stream, asio::buffer(&byte, 1), use_tuple);
    if (write_error || conn.closed) co_return false;
    conn.delay.expires_after(answer.trickle);
    auto [wait_error] = co_await conn.delay.async_wait(use_tuple);
    if (wait_error) co_return false;
  }
  co_return true;
}

// Hostile bodies, streamed from a fixed buffer so the sink's memory stays flat whatever it
// sends. True when the connection may serve another request (a whole sized body on a
// keep-alive request); false when it is finished with.
template <class Stream>
asio::awaitable<bool> stream_answer(Stream& stream, const reply& answer, recorder& records) {
  auto& lowest = beast::get_lowest_layer(stream);
  http::response<http::empty_body> head{answer.response.result(), answer.response.version()};
  for (const auto& field : answer.response.base()) {
    if (field.name() == http::field::content_length) continue;
    head.set(field.name_string(), field.value());
  }
  const bool keep_alive = answer.body == body_shape::sized && answer.response.keep_alive();
  head.keep_alive(keep_alive);
  if (answer.body == body_shape::endless_chunked) {
    head.chunked(true);
  } else {
    head.content_length(answer.body_length);
  }
  http::response_serializer<http::empty_body> serializer(head);
  lowest.expires_after(write_timeout);
  auto [head_error, head_bytes] = co_await http::async_write_header(stream, serializer, use_tuple);
  if (head_error) co_return false;

  static const std::string filler(64 * 1024, ' ');
  std::uint64_t sent = 0;
  bool ok = true;
  switch (answer.body) {
    case body_shape::sized:
      while (ok && sent < answer.body_length) {
        const auto part = static_cast<std::size_t>(
            std::min<std::uint64_t>(filler.size(), answer.body_length - sent));
        lowest.expires_after(write_timeout);
        auto [ec, n] =
            co_await asio::async_write(stream, asio::buffer(filler.data(), part), use_tuple);
        sent += n;
        ok = !ec;
      }
      break;
    case body_shape::announced: {
      // Far less than announced; then the connection is held open, so a client trusting the
      // Content-Length waits for bytes that never come.
      const auto part = static_cast<std::size_t>(std::min<std::uint64_t>(2, answer.body_length));
      lowest.expires_after(write_timeout);
      auto [ec, n] = co_await asio::async_write(stream, asio::buffer("{}", part), use_tuple);
      sent += n;
      records.note_streamed(sent);
      if (!ec) co_await hold_open(stream);
      co_return false;
    }
    case body_shape::endless_chunked: {
      const std::string chunk = "1000\r\n" + filler.substr(0, 0x1000) + "\r\n";
      while (ok) {
        lowest.expires_after(write_timeout);
        auto [ec, n] = co_await asio::async_write(stream, asio::buffer(chunk), use_tuple);
        sent += n;
        ok = !ec;
      }
      break;
    }
    case body_shape::normal: break;
  }
  records.note_streamed(sent);
  co_return ok&& keep_alive;
}

template <class Stream>
asio::awaitable<void> close_gracefully(Stream& stream, bool drain_input) {
  auto& lowest = beast::get_lowest_layer(stream);
  beast::error_code ignored;
  if constexpr (is_tls<Stream>) {
    lowest.expires_after(lingering_close);
    co_await stream.async_shutdown(use_tuple);
  } else {
    lowest.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
    if (drain_input) {
      lowest.expires_after(lingering_close);
      std::array<char, 4096> discard;
      for (;;) {
        auto [ec, n] = co_await lowest.async_read_some(asio::buffer(discard), use_tuple);
        if (ec) break;
      }
    }
  }
}

}  // namespace surge::sink::detail
