#include "engine/http_client.hpp"
#include "engine/response_parser.hpp"

#include <algorithm>
#include <optional>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <openssl/ssl.h>

namespace surge::engine {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using proto::transport_error;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

std::optional<proto::ip_address> to_proto_address(const asio::ip::address& address) {
  proto::ip_address out;
  if (address.is_v4()) {
    const auto bytes = address.to_v4().to_bytes();
    std::copy(bytes.begin(), bytes.end(), out.bytes.begin());
  } else {
    out.v6 = true;
    const auto bytes = address.to_v6().to_bytes();
    std::copy(bytes.begin(), bytes.end(), out.bytes.begin());
  }
  return out;
}

bool is_timeout(const error_code& ec) {
  return ec == beast::error::timeout || ec == asio::error::timed_out;
}

// A read that ends before any response byte: the peer closed or reset after our request.
bool is_peer_gone(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == asio::error::connection_aborted || ec == ssl::error::stream_truncated;
}

}  // namespace

struct http_client::connection {
  explicit connection(beast::tcp_stream stream) : plain(std::move(stream)) {}
  connection(beast::tcp_stream stream, ssl::context& context)
      : secure(std::in_place, std::move(stream), context) {}

  beast::tcp_stream& lowest() { return plain ? *plain : beast::get_lowest_layer(*secure); }

  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;
  beast::flat_buffer buffer;  // kept across responses; a fresh parser reads each one
  connection_lifecycle lifecycle;
};

struct http_client::origin {
  explicit origin(std::chrono::steady_clock::duration idle_timeout) : idle(idle_timeout) {}
  idle_list<connection_ptr> idle;
};

struct http_client::exchange_outcome {
  int status = 0;
  transport_error error = transport_error::none;
  std::string detail;
  std::string retry_after;
  std::string body_prefix;
  bool reusable = false;
};

std::shared_ptr<ssl::context> make_client_tls_context(const http_client_config& config) {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                       ssl::context::no_tlsv1_1);
  SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
  // Early data is never sent: a replayed 0-RTT POST would be a duplicate delivery.
  SSL_CTX_set_max_early_data(context->native_handle(), 0);
  context->set_verify_mode(ssl::verify_peer);
  if (config.ca_file) {
    context->load_verify_file(*config.ca_file);
  } else {
    context->set_default_verify_paths();
  }
  return context;
}

http_client::http_client(asio::any_io_executor executor, std::shared_ptr<ssl::context> tls,
                         http_client_config config,
                         std::atomic<std::int64_t>* open_connections_gauge)
    : executor_(std::move(executor)),
      tls_(std::move(tls)),
      config_(std::move(config)),
      open_connections_gauge_(open_connections_gauge) {}

http_client::~http_client() = default;

http_client::origin& http_client::origin_for(const proto::target& target) {
  auto& slot = origins_[target.origin_key];
  if (!slot) slot = std::make_unique<origin>(config_.idle_timeout);
  return *slot;
}

void http_client::close(connection_ptr conn) {
  if (!conn) return;
  error_code ignored;
  conn->lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
  conn->lowest().close();
  if (open_connections_gauge_) open_connections_gauge_->fetch_sub(1, std::memory_order_relaxed);
}

void http_client::evict_idle() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<connection_ptr> expired;
  for (auto& [key, entry] : origins_) entry->idle.evict(now, expired);
  for (auto& conn : expired) close(std::move(conn));
}

void http_client::close_idle() {
  std::vector<connection_ptr> all;
  for (auto& [key, entry] : origins_) entry->idle.clear(all);
  for (auto& conn : all) close(std::move(conn));
}

asio::awaitable<http_client::connection_ptr> http_client::open(const proto::target& target,
                                                               steady_time deadline,
                                                               http_result& result) {
  using namespace asio::experimental::awaitable_operators;
  const auto connect_deadline =
      std::min(deadline, std::chrono::steady_clock::now() + config_.connect_timeout);

  std::vector<tcp::endpoint> resolved;
  error_code ec;
  if (auto literal = asio::ip::make_address(target.host, ec); !ec) {
    resolved.emplace_back(literal, target.port);
  } else {
    tcp::resolver resolver(executor_);
    asio::steady_timer timer(executor_, connect_deadline);
    auto winner = co_await (resolver.async_resolve(target.host, std::to_string(target.port),
                                                   use_tuple) ||
                            timer.async_wait(use_tuple));
    if (winner.index() == 1) {
      result.error = transport_error::resolve;
      result.detail = "resolving " + target.host + " timed out";
      co_return nullptr;
    }
    auto [resolve_ec, results] = std::get<0>(winner);
    if (resolve_ec) {
      result.error = transport_error::resolve;
      result.detail = "resolving " + target.host + ": " + resolve_ec.message();
      co_return nullptr;
    }
    for (const auto& entry : results) resolved.push_back(entry.endpoint());
  }

  // Every resolved address is checked and only checked ones are connected to: no second lookup
  // can swap in an internal address (DNS rebinding).
  std::vector<tcp::endpoint> allowed;
  std::string refused;
  for (const auto& endpoint : resolved) {
    const auto address = to_proto_address(endpoint.address());
    const auto kind = proto::classify_address(*address);
    if (kind == proto::address_class::public_routable || config_.allow_private_targets) {
      allowed.push_back(endpoint);
    } else if (refused.empty()) {
      refused = endpoint.address().to_string() + " (" + std::string(proto::to_string(kind)) + ")";
    }
  }
  if (allowed.empty()) {
    result.error = transport_error::refused_target;
    result.detail = refused.empty() ? "no address for " + target.host
                                    : "refused non-public address " + refused;
    co_return nullptr;
  }

  beast::tcp_stream stream(executor_);
  stream.expires_at(connect_deadline);
  auto [connect_ec, endpoint] = co_await stream.async_connect(allowed, use_tuple);
  if (connect_ec) {
    result.error = is_timeout(connect_ec) ? transport_error::connect_timeout
                                          : transport_error::connect;
    result.detail = "connecting to " + target.host + ": " + connect_ec.message();
    co_return nullptr;
  }
  stream.socket().set_option(tcp::no_delay(true), ec);
  if (open_connections_gauge_) open_connections_gauge_->fetch_add(1, std::memory_order_relaxed);

  if (!target.tls) {
    auto conn = std::make_unique<connection>(std::move(stream));
    conn->lifecycle.on_connected();
    co_return conn;
  }

  auto conn = std::make_unique<connection>(std::move(stream), *tls_);
  auto& tls_stream = *conn->secure;
  error_code literal_ec;
  asio::ip::make_address(target.host, literal_ec);
  if (literal_ec && !SSL_set_tlsext_host_name(tls_stream.native_handle(), target.host.c_str())) {
    result.error = transport_error::tls;
    result.detail = "cannot set SNI host name";
    close(std::move(conn));
    co_return nullptr;
  }
  tls_stream.set_verify_callback(ssl::host_name_verification(target.host));
  conn->lowest().expires_at(deadline);
  auto [handshake_ec] = co_await tls_stream.async_handshake(ssl::stream_base::client, use_tuple);
  if (handshake_ec) {
    result.error = is_timeout(handshake_ec) ? transport_error::timeout : transport_error::tls;
    result.detail = "TLS handshake with " + target.host + ": " + handshake_ec.message();
    close(std::move(conn));
    co_return nullptr;
  }
  conn->lifecycle.on_connected();
  co_return conn;
}

namespace {

template <class Stream, class Outcome>
asio::awaitable<void> run_exchange(Stream& stream, beast::tcp_stream& lowest,
                                   beast::flat_buffer& buffer, connection_lifecycle& lifecycle,
                                   const http_request& request, steady_time deadline,
                                   const http_client_config& config, Outcome& out) {
  lifecycle.on_exchange_start();
  lowest.expires_at(deadline);
  auto [write_ec, written] = co_await http::async_write(stream, request, use_tuple);
  if (write_ec) {
    out.error = is_timeout(write_ec) ? transport_error::timeout : transport_error::send;
    out.detail = "sending request: " + write_ec.message();
    lifecycle.on_failure();
    co_return;
  }

  response_parser parser;
  prepare_for_header(parser, config);
  auto [header_ec, header_bytes] = co_await http::async_read_header(stream, buffer, parser,
                                                                    use_tuple);
  if (parser.got_some() || buffer.size() > 0) lifecycle.on_response_byte();
  if (header_ec) {
    lifecycle.on_failure();
    if (is_timeout(header_ec)) {
      out.error = transport_error::timeout;
      out.detail = "no response before the attempt deadline";
    } else if (!parser.got_some() && is_peer_gone(header_ec)) {
      out.error = transport_error::reset_before_response;
      out.detail = "connection closed before a response: " + header_ec.message();
    } else if (header_ec.category() == http::make_error_code(http::error::bad_version).category()) {
      out.error = transport_error::protocol;
      out.detail = "bad response: " + header_ec.message();
    } else {
      out.error = transport_error::receive;
      out.detail = "reading response: " + header_ec.message();
    }
    co_return;
  }

  auto& response = parser.get();
  out.status = static_cast<int>(response.result_int());
  if (auto it = response.find(http::field::retry_after); it != response.end()) {
    out.retry_after = std::string(it->value());
  }

  bool read_whole = parser.is_done();
  const auto announced = parser.content_length();
  if (!read_whole && announced && *announced > config.max_response_body) {
    // Beast checks body_limit against Content-Length only while parsing the header, so a large
    // announced body is not read at all: the status is what counts, the connection is dropped.
    out.detail = "response body of " + std::to_string(*announced) + " bytes not read";
  } else if (!read_whole) {
    prepare_for_body(parser, config);
    // Piece by piece, so that neither a long body nor a peer that keeps sending can hold the
    // attempt past its cap or its deadline (an expired stream timer does not fire while reads
    // keep completing).
    while (!parser.is_done()) {
      if (std::chrono::steady_clock::now() >= deadline) {
        out.detail = "response body not finished by the attempt deadline";
        break;
      }
      auto [body_ec, body_bytes] = co_await http::async_read_some(stream, buffer, parser, use_tuple);
      if (body_ec == http::error::body_limit) break;
      if (body_ec) {
        // The status already arrived and stands; only the connection is lost.
        out.detail = "response body: " + body_ec.message();
        break;
      }
      if (response.body().size() > config.max_response_body) break;
    }
    read_whole = parser.is_done();
  }
  out.body_prefix = beast::buffers_to_string(response.body().data());
  if (out.body_prefix.size() > config.max_response_body) {
    out.body_prefix.resize(config.max_response_body);
  }
  // Bytes beyond the response (pipelined garbage) make the connection unsafe to reuse.
  out.reusable = read_whole && response.keep_alive() && buffer.size() == 0;
  lifecycle.on_response_complete(response.keep_alive(), read_whole && buffer.size() == 0);
}

}  // namespace

asio::awaitable<http_client::exchange_outcome> http_client::exchange(connection& conn,
                                                                     const http_request& request,
                                                                     steady_time deadline) {
  exchange_outcome out;
  if (conn.plain) {
    co_await run_exchange(*conn.plain, conn.lowest(), conn.buffer, conn.lifecycle, request,
                          deadline, config_, out);
  } else {
    co_await run_exchange(*conn.secure, conn.lowest(), conn.buffer, conn.lifecycle, request,
                          deadline, config_, out);
  }
  co_return out;
}

asio::awaitable<http_result> http_client::send(const proto::target& target,
                                               const http_request& request,
                                               const before_write& gate) {
  auto deadline = std::chrono::steady_clock::now() + config_.attempt_timeout;
  http_result result;
  auto& pool = origin_for(target);

  for (int tries = 0; tries < 2; ++tries) {
    std::vector<connection_ptr> expired;
    auto reused = pool.idle.take(std::chrono::steady_clock::now(), expired);
    for (auto& conn : expired) close(std::move(conn));

    connection_ptr conn;
    if (reused) {
      conn = std::move(*reused);
      result.reused_connection = true;
    } else {
      result.reused_connection = false;
      conn = co_await open(target, deadline, result);
      if (!conn) co_return result;
    }

    if (gate) {
      const auto asked = std::chrono::steady_clock::now();
      const bool go = co_await gate(!result.reused_connection);
      // Waiting to be let through is not the endpoint's time: the deadline moves by as much.
      deadline += std::chrono::steady_clock::now() - asked;
      if (!go) {
        // Nothing was written, so the connection is as good as it was.
        pool.idle.put(std::move(conn), std::chrono::steady_clock::now());
        // On the fresh retry, the first try's failure stands.
        result.not_sent = tries == 0;
        co_return result;
      }
    }

    const auto exchange_began = std::chrono::steady_clock::now();
    auto out = co_await exchange(*conn, request, deadline);
    result.exchange_time = std::chrono::steady_clock::now() - exchange_began;
    if (out.error != transport_error::none && conn->lifecycle.failure_warrants_fresh_retry() &&
        std::chrono::steady_clock::now() < deadline && tries == 0) {
      close(std::move(conn));
      result.fresh_retry = true;
      result.error = out.error;
      result.detail = std::move(out.detail);
      continue;
    }
    result.status = out.status;
    result.error = out.error;
    result.detail = std::move(out.detail);
    result.retry_after = std::move(out.retry_after);
    result.body_prefix = std::move(out.body_prefix);
    if (out.reusable) {
      pool.idle.put(std::move(conn), std::chrono::steady_clock::now());
    } else {
      close(std::move(conn));
    }
    co_return result;
  }
  co_return result;
}

}  // namespace surge::engine
