#include "engine/observe/metrics_server.hpp"

#include <charconv>
#include <cstddef>
#include <chrono>
#include <stdexcept>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "engine/awaiting.hpp"
#include "engine/observe/live_page.hpp"

namespace surge::engine {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {
// How long the listener waits after a failed accept before the next: a scrape a few tens of
// milliseconds late costs nothing, a thread spinning on EMFILE costs a core.
constexpr std::chrono::milliseconds accept_failure_pause{50};
// Clients served at once. Each holds a file descriptor for up to 10 s idle, out of the few the
// drain keeps besides its partner connections (tools/file_limit.hpp): a scraper that opens
// connections and leaves them must not take the descriptors a partner's connect needs.
// Prometheus keeps one; the live page and a dashboard or two a few more.
constexpr std::size_t max_clients = 32;
}  // namespace
using tcp = asio::ip::tcp;

tcp::endpoint parse_listen_address(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) throw std::invalid_argument("expected HOST:PORT, got " + text);
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  // A bare ":PORT" would mean every interface: the metrics then reach whoever can reach the
  // host, so that must be said explicitly.
  if (host.empty()) {
    throw std::invalid_argument("no host in " + text +
                                " (127.0.0.1:PORT for this machine only, "
                                "0.0.0.0:PORT or [::]:PORT for every interface)");
  }
  unsigned port = 0;
  const auto* begin = text.data() + colon + 1;
  const auto* end = text.data() + text.size();
  const auto [last, error] = std::from_chars(begin, end, port);
  if (begin == end || error != std::errc{} || last != end || port > 65535) {
    throw std::invalid_argument("bad port in " + text);
  }
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) throw std::invalid_argument("bad address in " + text + " (give an IP address)");
  return {address, static_cast<std::uint16_t>(port)};
}

struct metrics_server::state : std::enable_shared_from_this<state> {
  state(asio::io_context& io, handlers h) : acceptor(io), on(std::move(h)) {}

  asio::awaitable<void> accept_loop() {
    auto self = shared_from_this();
    while (acceptor.is_open()) {
      auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
      if (ec) {
        if (!acceptor.is_open() || ec == asio::error::operation_aborted) co_return;
        // Out of descriptors (EMFILE) and the like: the client stays queued and the listener
        // ready, so accepting again at once would spin this thread until a descriptor frees.
        asio::steady_timer pause(acceptor.get_executor(), accept_failure_pause);
        co_await pause.async_wait(use_tuple);
        continue;
      }
      if (clients >= max_clients) {
        // Closed at once: the client sees its connection end and asks again later.
        boost::system::error_code ignored;
        socket.close(ignored);
        continue;
      }
      ++clients;  // here, not when serve starts: the next accept may complete first
      asio::co_spawn(acceptor.get_executor(), serve(beast::tcp_stream(std::move(socket))),
                     asio::detached);
    }
  }

  asio::awaitable<void> serve(beast::tcp_stream stream) {
    auto self = shared_from_this();
    struct counted {
      std::size_t& clients;
      ~counted() { --clients; }
    } while_served{clients};
    beast::flat_buffer buffer;
    while (true) {
      stream.expires_after(std::chrono::seconds(10));
      http::request<http::string_body> request;
      auto [read_ec, read_bytes] = co_await http::async_read(stream, buffer, request, use_tuple);
      if (read_ec) break;
      http::response<http::string_body> response{http::status::ok, request.version()};
      response.set(http::field::server, "surge");
      const auto target = request.target();
      if (request.method() != http::verb::get) {
        response.result(http::status::method_not_allowed);
        response.body() = "GET only\n";
      } else if (target == "/metrics") {
        response.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
        response.body() = on.metrics();
      } else if (target == "/healthz") {
        const auto reason = on.unhealthy_reason();
        response.result(reason.empty() ? http::status::ok : http::status::service_unavailable);
        response.body() = reason.empty() ? "ok\n" : reason + "\n";
      } else if (target == "/" || target == "/index.html") {
        response.set(http::field::content_type, "text/html; charset=utf-8");
        response.body() = live_page_html();
      } else if (target == "/partners.json") {
        response.set(http::field::content_type, "application/json");
        response.set(http::field::cache_control, "no-store");
        response.body() = on.partners_json();
      } else {
        response.result(http::status::not_found);
        response.body() = "try /, /partners.json, /metrics or /healthz\n";
      }
      response.keep_alive(request.keep_alive());
      response.prepare_payload();
      auto [write_ec, written] = co_await http::async_write(stream, response, use_tuple);
      if (write_ec || !response.keep_alive()) break;
    }
    boost::system::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  }

  tcp::acceptor acceptor;
  handlers on;
  std::size_t clients = 0;  // being served; only the control thread touches it
};

metrics_server::metrics_server(asio::io_context& io, const std::string& listen, handlers h)
    : state_(std::make_shared<state>(io, std::move(h))) {
  const auto endpoint = parse_listen_address(listen);
  state_->acceptor.open(endpoint.protocol());
  state_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  state_->acceptor.bind(endpoint);
  state_->acceptor.listen();
  asio::co_spawn(io, state_->accept_loop(), asio::detached);
}

metrics_server::~metrics_server() { stop(); }

std::uint16_t metrics_server::port() const { return state_->acceptor.local_endpoint().port(); }

void metrics_server::stop() {
  boost::system::error_code ignored;
  state_->acceptor.close(ignored);
}

}  // namespace surge::engine
