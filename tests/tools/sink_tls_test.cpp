// The sink behind TLS, with a CA made for the test: trusted clients are served, others fail.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <openssl/ssl.h>

#include "sink_test_support.hpp"
#include "tools/sink/sink_server.hpp"

namespace surge::sink {
namespace {

using namespace testing;

class SinkTls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_dir_ = new temp_dir();
    pki_ = make_test_pki(pki_dir_->path());
  }
  static void TearDownTestSuite() {
    delete pki_dir_;
    pki_dir_ = nullptr;
  }

  void SetUp() override {
    queue_ = dir_.file("queue.db");
    create_queue(queue_, default_subscribers());
    sink_config config;
    config.db_path = queue_;
    config.record_path = dir_.file("record.csv");
    config.tls_cert = pki_.server_cert;
    config.tls_key = pki_.server_key;
    server_ = std::make_unique<sink_server>(std::move(config));
    server_->start();
  }

  static request_type signed_for(std::int64_t id) {
    for (const auto& row : default_subscribers())
      if (row.id == id) return signed_request({.subscriber_id = id}, row);
    throw std::invalid_argument("no such test subscriber");
  }

  static inline temp_dir* pki_dir_ = nullptr;
  static inline test_pki pki_;
  temp_dir dir_;
  std::string queue_;
  std::unique_ptr<sink_server> server_;
};

TEST_F(SinkTls, ClientTrustingTheCaIsServedOverOneConnection) {
  test_client client(server_->port(), pki_.ca_cert);
  const auto connected = client.connect();
  ASSERT_FALSE(connected) << connected.message();
  for (std::int64_t id : {vvv_id, standard_id}) {
    const auto result = client.send(signed_for(id));
    ASSERT_TRUE(result.response) << result.error.message();
    EXPECT_EQ(result.response->result_int(), 200u);
  }
  server_->stop();
  const auto lines = read_lines(dir_.file("record.csv"));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(split_csv(lines[0])[4], "ok");
  EXPECT_EQ(split_csv(lines[1])[4], "ok");
  EXPECT_EQ(split_csv(lines[0])[7], split_csv(lines[1])[7]);
}

TEST_F(SinkTls, ClientByIpAddressIsServed) {
  test_client client(server_->port(), pki_.ca_cert, "127.0.0.1");
  const auto connected = client.connect();
  ASSERT_FALSE(connected) << connected.message();
  EXPECT_TRUE(client.send(signed_for(vvv_id)).response);
}

TEST_F(SinkTls, ClientNotTrustingTheCaFails) {
  test_client client(server_->port(), "");
  const auto connected = client.connect();
  EXPECT_TRUE(connected);
  EXPECT_FALSE(client.send(signed_for(vvv_id)).response);
}

TEST_F(SinkTls, WrongHostNameFails) {
  test_client client(server_->port(), pki_.ca_cert, "example.com");
  EXPECT_TRUE(client.connect());
}

TEST_F(SinkTls, RecordsTheServerNameTheClientSent) {
  test_client client(server_->port(), pki_.ca_cert, "localhost");
  ASSERT_FALSE(client.connect());
  ASSERT_TRUE(client.send(signed_for(vvv_id)).response);
  server_->stop();
  const auto lines = read_lines(dir_.file("record.csv"));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(split_csv(lines[0]).at(8), "localhost");
}

// A client that speaks only TLS 1.1, at the security level OpenSSL 3 requires for it.
boost::beast::error_code handshake_with_tls_1_1(std::uint16_t port) {
  namespace asio = boost::asio;
  asio::io_context io;
  asio::ssl::context context(asio::ssl::context::tls_client);
  SSL_CTX* native = context.native_handle();
  SSL_CTX_set_security_level(native, 0);
  SSL_CTX_set_min_proto_version(native, TLS1_1_VERSION);
  SSL_CTX_set_max_proto_version(native, TLS1_1_VERSION);
  SSL_CTX_set_cipher_list(native, "DEFAULT:@SECLEVEL=0");
  context.set_verify_mode(asio::ssl::verify_none);
  asio::ssl::stream<asio::ip::tcp::socket> stream(io, context);
  boost::beast::error_code error;
  stream.next_layer().connect({asio::ip::make_address("127.0.0.1"), port}, error);
  if (!error) stream.handshake(asio::ssl::stream_base::client, error);
  return error;
}

TEST_F(SinkTls, MaxVersionOneOneServesOnlyTls11) {
  sink_config config;
  config.db_path = queue_;
  config.tls_cert = pki_.server_cert;
  config.tls_key = pki_.server_key;
  config.tls_max_version = "1.1";
  sink_server old_server(std::move(config));
  old_server.start();
  EXPECT_FALSE(handshake_with_tls_1_1(old_server.port())) << "the sink must speak TLS 1.1";
  test_client modern(old_server.port(), pki_.ca_cert);
  EXPECT_TRUE(modern.connect()) << "a TLS 1.2+ client must not agree with a TLS 1.1 server";
  // The default sink refuses TLS 1.1, as Surge's client does.
  EXPECT_TRUE(handshake_with_tls_1_1(server_->port()));
}

TEST_F(SinkTls, BadMaxVersionIsRefused) {
  sink_config config;
  config.db_path = queue_;
  config.tls_cert = pki_.server_cert;
  config.tls_key = pki_.server_key;
  config.tls_max_version = "1.0";
  EXPECT_THROW(sink_server{std::move(config)}, std::invalid_argument);
  sink_config plain;
  plain.db_path = queue_;
  plain.tls_max_version = "1.2";
  EXPECT_THROW(sink_server{std::move(plain)}, std::invalid_argument);
}

TEST_F(SinkTls, PlainHttpGetsNoResponse) {
  const auto result = send_once(server_->port(), signed_for(vvv_id), std::chrono::seconds(5));
  EXPECT_FALSE(result.response);
  server_->stop();
  EXPECT_TRUE(read_lines(dir_.file("record.csv")).empty());
}

}  // namespace
}  // namespace surge::sink
