#include "tools/sink/sink_server.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>

#include "storage/database.hpp"
#include "tools/sink/connection_registry.hpp"
#include "tools/sink/recorder.hpp"
#include "tools/sink/request_handler.hpp"
#include "tools/sink/subscriber_directory.hpp"

namespace surge::sink {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr auto handshake_timeout = std::chrono::seconds(10);
constexpr auto write_timeout = std::chrono::seconds(10);
// After a 413 the client may still be sending its body; closing at once would turn the answer
// into a reset, so unread input is drained this long first.
constexpr auto lingering_close = std::chrono::seconds(1);
constexpr auto stop_grace = std::chrono::seconds(5);

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

int tls_version_code(const std::string& text) {
  if (text == "1.1") return TLS1_1_VERSION;
  if (text == "1.2") return TLS1_2_VERSION;
  if (text == "1.3") return TLS1_3_VERSION;
  throw std::invalid_argument("TLS version must be 1.1, 1.2 or 1.3, not " + text);
}

ssl::context make_tls_context(const std::string& cert, const std::string& key,
                              const std::string& max_version) {
  ssl::context context(ssl::context::tls_server);
  SSL_CTX* native = context.native_handle();
  context.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                      ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                      ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  if (!max_version.empty()) {
    const int newest = tls_version_code(max_version);
    if (newest < TLS1_2_VERSION) {
      // An obsolete-only server, for testing that clients refuse it: OpenSSL 3 (and Debian's
      // system configuration) allow TLS 1.1 only at security level 0.
      SSL_CTX_clear_options(native, SSL_OP_NO_TLSv1_1);
      SSL_CTX_set_security_level(native, 0);
      SSL_CTX_set_min_proto_version(native, newest);
      if (SSL_CTX_set_cipher_list(native, "DEFAULT:@SECLEVEL=0") != 1)
        throw std::runtime_error("cannot enable TLS 1.1 ciphers");
    }
    SSL_CTX_set_max_proto_version(native, newest);
  }
  context.use_certificate_chain_file(cert);
  context.use_private_key_file(key, ssl::context::pem);
  return context;
}

std::string format_endpoint(const tcp::endpoint& endpoint) {
  const std::string host = endpoint.address().to_string();
  return (endpoint.address().is_v6() ? "[" + host + "]" : host) + ":" +
         std::to_string(endpoint.port());
}

void log_exception(std::string_view where, const std::exception_ptr& error) {
  if (!error) return;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    std::cerr << "surge sink: " << where << ": " << e.what() << "\n";
  } catch (...) {
    std::cerr << "surge sink: " << where << ": unknown exception\n";
  }
}

}  // namespace

struct sink_server::impl {
  explicit impl(sink_config&& cfg)
      : config(std::move(cfg)),
        subscribers(config.db_path),
        behaviours(std::move(config.behaviours), config.seed),
        records(config.record_path),
        handler(subscribers, behaviours, records) {
    if (config.tls_cert.empty() != config.tls_key.empty())
      throw std::invalid_argument("TLS needs both a certificate and a key");
    if (!config.tls_max_version.empty() && config.tls_cert.empty())
      throw std::invalid_argument("a TLS version needs a certificate and a key");
    if (!config.tls_cert.empty())
      tls.emplace(make_tls_context(config.tls_cert, config.tls_key, config.tls_max_version));
    if (config.threads < 1) throw std::invalid_argument("threads must be at least 1");
    listen();
  }

  void listen() {
    tcp::resolver resolver(io);
    const auto results = resolver.resolve(config.host, std::to_string(config.port),
                                          tcp::resolver::numeric_service);
    const tcp::endpoint endpoint = results.begin()->endpoint();
    acceptor.open(endpoint.protocol());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    acceptor.bind(endpoint);
    acceptor.listen(asio::socket_base::max_listen_connections);
    bound = acceptor.local_endpoint();
  }

  asio::awaitable<void> accept_loop() {
    for (;;) {
      asio::any_io_executor strand = asio::make_strand(io);
      auto [ec, socket] = co_await acceptor.async_accept(strand, use_tuple);
      if (ec) {
        if (!acceptor.is_open() || ec == asio::error::operation_aborted) co_return;
        // Out of descriptors and the like: back off instead of spinning on the error.
        asio::steady_timer pause(co_await asio::this_coro::executor, std::chrono::milliseconds(50));
        co_await pause.async_wait(use_tuple);
        continue;
      }
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      records.note_connection();
      const std::uint64_t id = ++last_connection_id;
      if (tls) {
        spawn(std::make_shared<connection<tls_stream>>(id, strand, std::move(socket), *tls));
      } else {
        spawn(std::make_shared<connection<beast::tcp_stream>>(id, strand, std::move(socket)));
      }
    }
  }

  template <class Stream>
  void spawn(std::shared_ptr<connection<Stream>> conn) {
    auto executor = conn->delay.get_executor();
    asio::co_spawn(executor, run_connection(std::move(conn)),
                   [](std::exception_ptr error) { log_exception("connection", error); });
  }

  template <class Stream>
  static void close_now(connection<Stream>& conn) {
    beast::error_code ignored;
    conn.closed = true;
    conn.delay.cancel();
    beast::get_lowest_layer(conn.stream).socket().close(ignored);
  }

  template <class Stream>
  asio::awaitable<void> run_connection(std::shared_ptr<connection<Stream>> conn) {
    std::weak_ptr<connection<Stream>> weak = conn;
    const bool registered = registry.add(conn->id, [weak] {
      if (auto alive = weak.lock()) {
        auto executor = alive->delay.get_executor();
        asio::dispatch(executor, [alive = std::move(alive)] { close_now(*alive); });
      }
    });
    if (registered) {
      try {
        co_await serve(*conn);
      } catch (const std::exception& error) {
        std::cerr << "surge sink: connection " << conn->id << ": " << error.what() << "\n";
      }
      registry.remove(conn->id);
    }
    close_now(*conn);
  }

  template <class Stream>
  asio::awaitable<void> serve(connection<Stream>& conn) {
    Stream& stream = conn.stream;
    auto& lowest = beast::get_lowest_layer(stream);
    if constexpr (is_tls<Stream>) {
      lowest.expires_after(handshake_timeout);
      auto [ec] = co_await stream.async_handshake(ssl::stream_base::server, use_tuple);
      if (ec) co_return;
      if (const char* name = SSL_get_servername(stream.native_handle(), TLSEXT_NAMETYPE_host_name))
        conn.sni = name;
    }
    beast::flat_buffer buffer;
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(config.body_limit);
      lowest.expires_after(config.idle_timeout);
      auto [read_error, read_bytes] = co_await read_request(stream, buffer, parser);
      const double arrival = storage::unix_now();
      // Beast reports body_limit only after every header field was parsed into the message
      // (is_header_done() is still false when the Content-Length alone exceeds the limit).
      if (read_error == http::error::body_limit) {
        reply answer = handler.too_large(parser.get(), conn.id, arrival, conn.sni);
        lowest.expires_after(write_timeout);
        auto [write_error, written] =
            co_await http::async_write(stream, answer.response, use_tuple);
        if (!write_error) co_await close_gracefully(stream, true);
        co_return;
      }
      if (read_error || conn.closed) co_return;  // closed by the client, idle timeout, stop()

      reply answer = handler.handle(parser.get(), conn.id, arrival, conn.sni);
      if (answer.what == action::kind::hang) {
        co_await hold_open(stream);
        co_return;
      }
      // Counted until this iteration ends (answered, or the connection gone).
      const answering_count counted(answering);
      if (answer.delay.count() > 0 || answer.delay_per_request.count() > 0) {
        // A timer, not a sleep: other connections on this thread keep being served.
        conn.delay.expires_after(answer.delay + answer.delay_per_request * counted.load);
        auto [wait_error] = co_await conn.delay.async_wait(use_tuple);
        if (wait_error) co_return;
      }
      if (answer.what == action::kind::reset) {
        // Linger 0 makes close() send RST instead of FIN: the client sees a reset, not an EOF.
        beast::error_code ignored;
        lowest.socket().set_option(tcp::socket::linger(true, 0), ignored);
        lowest.socket().close(ignored);
        co_return;
      }
      if (answer.body != body_shape::normal) {
        if (!co_await stream_answer(stream, answer)) co_return;
        continue;
      }
      if (answer.trickle.count() > 0) {
        if (!co_await trickle_answer(conn, answer)) co_return;
        if (answer.response.need_eof()) break;
        continue;
      }
      lowest.expires_after(write_timeout);
      auto [write_error, written] = co_await http::async_write(stream, answer.response, use_tuple);
      if (write_error) co_return;
      if (answer.response.need_eof()) break;
    }
    co_await close_gracefully(stream, false);
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
  asio::awaitable<bool> stream_answer(Stream& stream, const reply& answer) {
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
    auto [head_error, head_bytes] =
        co_await http::async_write_header(stream, serializer, use_tuple);
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
          auto [ec, n] = co_await asio::async_write(stream, asio::buffer(filler.data(), part),
                                                    use_tuple);
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
      case body_shape::normal:
        break;
    }
    records.note_streamed(sent);
    co_return ok && keep_alive;
  }

  // Answers "Expect: 100-continue" (curl sends it for larger bodies and would otherwise wait a
  // second before sending the body), then reads the body.
  template <class Stream>
  asio::awaitable<std::tuple<beast::error_code, std::size_t>> read_request(
      Stream& stream, beast::flat_buffer& buffer, http::request_parser<http::string_body>& parser) {
    auto [header_error, header_bytes] =
        co_await http::async_read_header(stream, buffer, parser, use_tuple);
    if (header_error) co_return std::tuple{header_error, header_bytes};
    const auto& header = parser.get();
    if (header.version() >= 11 && beast::iequals(header[http::field::expect], "100-continue") &&
        !parser.is_done()) {
      http::response<http::empty_body> go_on{http::status::continue_, header.version()};
      auto [write_error, written] = co_await http::async_write(stream, go_on, use_tuple);
      if (write_error) co_return std::tuple{write_error, header_bytes};
    }
    co_return co_await http::async_read(stream, buffer, parser, use_tuple);
  }

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

  template <class Stream>
  asio::awaitable<void> close_gracefully(Stream& stream, bool drain_input) {
    auto& lowest = beast::get_lowest_layer(stream);
    beast::error_code ignored;
    if constexpr (is_tls<Stream>) {
      lowest.expires_after(lingering_close);
      co_await stream.async_shutdown(use_tuple);
    } else {
      lowest.socket().shutdown(tcp::socket::shutdown_send, ignored);
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

  void run_thread() {
    try {
      io.run();
    } catch (const std::exception& error) {
      std::cerr << "surge sink: io thread: " << error.what() << "\n";
    }
    {
      std::lock_guard lock(state_mutex);
      --running;
    }
    threads_done.notify_all();
  }

  // Members below outlive the io_context's handlers: declared first, destroyed last.
  sink_config config;
  subscriber_directory subscribers;
  responder behaviours;
  recorder records;
  request_handler handler;
  std::optional<ssl::context> tls;
  connection_registry registry;
  std::atomic<std::uint64_t> last_connection_id{0};
  std::atomic<int> answering{0};  // requests read and not yet answered, all threads

  asio::io_context io;
  tcp::acceptor acceptor{asio::make_strand(io)};
  tcp::endpoint bound;

  std::mutex state_mutex;
  std::condition_variable threads_done;
  int running = 0;
  bool started = false;
  bool stopped = false;
  std::vector<std::thread> threads;
};

sink_server::sink_server(sink_config config) : impl_(std::make_unique<impl>(std::move(config))) {}

sink_server::~sink_server() { stop(); }

std::uint16_t sink_server::port() const { return impl_->bound.port(); }

std::string sink_server::address() const { return format_endpoint(impl_->bound); }

std::string sink_server::stats_json() const { return impl_->records.stats_json(); }

void sink_server::start() {
  impl& self = *impl_;
  {
    std::lock_guard lock(self.state_mutex);
    if (self.started || self.stopped) return;
    self.started = true;
    self.running = self.config.threads;
  }
  asio::co_spawn(self.acceptor.get_executor(), self.accept_loop(),
                 [](std::exception_ptr error) { log_exception("accept", error); });
  for (int i = 0; i < self.config.threads; ++i)
    self.threads.emplace_back([&self] { self.run_thread(); });
}

void sink_server::stop() {
  impl& self = *impl_;
  {
    std::lock_guard lock(self.state_mutex);
    if (self.stopped) return;
    self.stopped = true;
  }
  asio::post(self.acceptor.get_executor(), [&self] {
    beast::error_code ignored;
    self.acceptor.close(ignored);
  });
  self.registry.close_all();
  {
    std::unique_lock lock(self.state_mutex);
    // Closing every socket normally ends every coroutine and run() returns by itself; the
    // grace period only guards against a handler that never completes.
    if (!self.threads_done.wait_for(lock, stop_grace, [&self] { return self.running == 0; }))
      self.io.stop();
  }
  for (auto& thread : self.threads) thread.join();
  self.threads.clear();
  self.records.close();
}

}  // namespace surge::sink
