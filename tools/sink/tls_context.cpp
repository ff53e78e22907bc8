#include "tools/sink/tls_context.hpp"

#include <stdexcept>

#include <openssl/ssl.h>

namespace surge::sink {

namespace ssl = boost::asio::ssl;

namespace {

int tls_version_code(const std::string& text) {
  if (text == "1.1") return TLS1_1_VERSION;
  if (text == "1.2") return TLS1_2_VERSION;
  if (text == "1.3") return TLS1_3_VERSION;
  throw std::invalid_argument("TLS version must be 1.1, 1.2 or 1.3, not " + text);
}

}  // namespace

ssl::context make_tls_context(const std::string& cert, const std::string& key,
                              const std::string& max_version) {
  ssl::context context(ssl::context::tls_server);
  SSL_CTX* native = context.native_handle();
  context.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                      ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                      ssl::context::single_dh_use);
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

}  // namespace surge::sink
