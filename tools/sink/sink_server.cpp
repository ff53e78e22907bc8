#include "tools/sink/sink_server.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <optional>
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
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "proto/clock.hpp"
#include "storage/database.hpp"
#include "tools/sink/connection.hpp"
#include "tools/sink/connection_registry.hpp"
#include "tools/sink/recorder.hpp"
#include "tools/sink/request_handler.hpp"
#include "tools/sink/subscriber_directory.hpp"
#include "tools/sink/tls_context.hpp"

namespace surge::sink {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using namespace detail;

namespace {

constexpr auto handshake_timeout = std::chrono::seconds(10);
constexpr auto stop_grace = std::chrono::seconds(5);

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
    const auto results =
        resolver.resolve(config.host, std::to_string(config.port), tcp::resolver::numeric_service);
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
      const double arrival = proto::unix_now();
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
        conn.delay.expires_after(answer.wait_while_answering(counted.load));
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
        if (!co_await stream_answer(stream, answer, records)) co_return;
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
