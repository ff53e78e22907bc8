#include "sink_test_support.hpp"

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include <openssl/err.h>

#include "proto/signing.hpp"
#include "storage/sqlite/database.hpp"
#include "storage/sqlite/schema.hpp"

namespace surge::sink::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

SQLite::Database open_queue(const std::string& path) {
  storage::sqlite::database_config config;
  config.path = path;
  return storage::sqlite::open_database(config);
}

}  // namespace

storage::subscriber_row make_subscriber(std::int64_t id, const std::string& signing,
                                        const std::string& secret) {
  storage::subscriber_row row;
  row.id = id;
  row.url = "http://127.0.0.1/hook/" + std::to_string(id);
  row.secret = secret;
  row.signing = signing;
  return row;
}

std::vector<storage::subscriber_row> default_subscribers() {
  std::vector<storage::subscriber_row> rows{
      make_subscriber(vvv_id), make_subscriber(standard_id, "standard", standard_secret)};
  for (std::int64_t id = 3; id <= 9; ++id) rows.push_back(make_subscriber(id));
  return rows;
}

void create_queue(const std::string& path, const std::vector<storage::subscriber_row>& rows) {
  SQLite::Database db = open_queue(path);
  storage::sqlite::migrate(db);
  for (const auto& row : rows) storage::sqlite::add_subscriber(db, row);
}

void add_subscriber(const std::string& path, const storage::subscriber_row& row) {
  SQLite::Database db = open_queue(path);
  storage::sqlite::add_subscriber(db, row);
}

request_type unsigned_request(const delivery& d) {
  request_type request{http::verb::post, "/hook/" + std::to_string(d.subscriber_id), 11};
  request.set(http::field::host, "127.0.0.1");
  request.set(http::field::content_type, "application/json");
  request.set(http::field::user_agent, "surge-sink-test");
  request.set("X-VVV-Event", d.event_type);
  request.set("X-VVV-Delivery-Id", d.delivery_id);
  request.set("X-VVV-Subscriber", std::to_string(d.subscriber_id));
  request.set("X-VVV-Attempt", std::to_string(d.attempt));
  request.body() = d.body;
  request.prepare_payload();
  return request;
}

request_type signed_request(const delivery& d, const storage::subscriber_row& subscriber) {
  request_type request = unsigned_request(d);
  const auto scheme = proto::parse_signing_scheme(subscriber.signing);
  if (!scheme) throw std::invalid_argument("bad signing " + subscriber.signing);
  std::string error;
  const auto signer = proto::signer::create(*scheme, subscriber.secret, &error);
  if (!signer) throw std::invalid_argument("cannot sign: " + error);
  const auto fields = signer->sign(d.delivery_id, std::time(nullptr), d.body);
  for (std::size_t i = 0; i < fields.size(); ++i) request.set(fields.name(i), fields.value(i));
  return request;
}

struct test_client::impl {
  std::uint16_t port;
  std::string host_name;
  asio::io_context io;
  std::optional<ssl::context> tls_context;
  std::optional<beast::tcp_stream> plain;
  std::optional<ssl::stream<beast::tcp_stream>> tls;
  beast::flat_buffer buffer;

  beast::tcp_stream& lowest() { return plain ? *plain : tls->next_layer(); }

  template <class T>
  T run(asio::awaitable<T> operation) {
    std::optional<T> result;
    std::exception_ptr failure;
    asio::co_spawn(io, std::move(operation), [&](std::exception_ptr error, T value) {
      failure = error;
      if (!error) result = std::move(value);
    });
    io.restart();
    io.run();
    if (failure) std::rethrow_exception(failure);
    return std::move(*result);
  }

  asio::awaitable<beast::error_code> connect(std::chrono::milliseconds timeout) {
    const tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), port);
    lowest().expires_after(timeout);
    auto [error] = co_await lowest().async_connect(endpoint, use_tuple);
    if (error || !tls) co_return error;
    if (!SSL_set_tlsext_host_name(tls->native_handle(), host_name.c_str()))
      co_return beast::error_code(static_cast<int>(::ERR_get_error()),
                                  asio::error::get_ssl_category());
    tls->set_verify_mode(ssl::verify_peer);
    tls->set_verify_callback(ssl::host_name_verification(host_name));
    auto [handshake_error] = co_await tls->async_handshake(ssl::stream_base::client, use_tuple);
    co_return handshake_error;
  }

  template <class Stream>
  asio::awaitable<exchange> send(Stream& stream, request_type request,
                                 std::chrono::milliseconds timeout) {
    exchange result;
    lowest().expires_after(timeout);
    auto [write_error, written] = co_await http::async_write(stream, request, use_tuple);
    if (write_error) {
      result.error = write_error;
      co_return result;
    }
    co_return co_await receive(stream, timeout);
  }

  template <class Stream>
  asio::awaitable<exchange> receive(Stream& stream, std::chrono::milliseconds timeout) {
    exchange result;
    lowest().expires_after(timeout);
    response_type response;
    auto [read_error, read] = co_await http::async_read(stream, buffer, response, use_tuple);
    result.error = read_error;
    if (!read_error) result.response = std::move(response);
    co_return result;
  }
};

test_client::test_client(std::uint16_t port) : impl_(std::make_unique<impl>()) {
  impl_->port = port;
  impl_->plain.emplace(impl_->io);
}

test_client::test_client(std::uint16_t port, const std::string& ca_file,
                         const std::string& host_name)
    : impl_(std::make_unique<impl>()) {
  impl_->port = port;
  impl_->host_name = host_name;
  impl_->tls_context.emplace(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(impl_->tls_context->native_handle(), TLS1_2_VERSION);
  if (!ca_file.empty()) impl_->tls_context->load_verify_file(ca_file);
  impl_->tls.emplace(impl_->io, *impl_->tls_context);
}

test_client::~test_client() = default;

beast::error_code test_client::connect(std::chrono::milliseconds timeout) {
  return impl_->run(impl_->connect(timeout));
}

exchange test_client::send(request_type request, std::chrono::milliseconds timeout) {
  if (impl_->plain) return impl_->run(impl_->send(*impl_->plain, std::move(request), timeout));
  return impl_->run(impl_->send(*impl_->tls, std::move(request), timeout));
}

exchange test_client::receive(std::chrono::milliseconds timeout) {
  if (impl_->plain) return impl_->run(impl_->receive(*impl_->plain, timeout));
  return impl_->run(impl_->receive(*impl_->tls, timeout));
}

exchange send_once(std::uint16_t port, request_type request, std::chrono::milliseconds timeout) {
  test_client client(port);
  if (const auto error = client.connect(timeout)) return {error, std::nullopt};
  return client.send(std::move(request), timeout);
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

}  // namespace surge::sink::testing
