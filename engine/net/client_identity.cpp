#include "engine/net/client_identity.hpp"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <sstream>
#include <stdexcept>

#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>
#include <openssl/asn1.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "engine/bounded_file.hpp"
#include "engine/net/tls_sessions.hpp"

namespace surge::engine {

namespace ssl = boost::asio::ssl;

namespace {

// A client certificate or key, read with the bound every file Surge reads has.
std::string read_pem(const std::string& path, const char* what) {
  return read_bounded_file(path, max_pem_file_bytes, std::string("cannot read ") + what);
}

std::string digest_of(const std::string& cert, const std::string& key) {
  EVP_MD_CTX* context = EVP_MD_CTX_new();
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  const bool ok = context != nullptr && EVP_DigestInit_ex(context, EVP_sha256(), nullptr) == 1 &&
                  EVP_DigestUpdate(context, cert.data(), cert.size()) == 1 &&
                  EVP_DigestUpdate(context, "\n--\n", 4) == 1 &&
                  EVP_DigestUpdate(context, key.data(), key.size()) == 1 &&
                  EVP_DigestFinal_ex(context, digest, &size) == 1;
  EVP_MD_CTX_free(context);
  if (!ok) throw std::runtime_error("cannot hash the client certificate");
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < size; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 0xf];
  }
  return out;
}

// "2020-01-02T00:00:00Z", or "an unreadable time".
std::string printable_time(const ASN1_TIME* time) {
  std::tm parts{};
  if (time == nullptr || ASN1_TIME_to_tm(time, &parts) != 1) return "an unreadable time";
  char text[32];
  if (std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts) == 0) {
    return "an unreadable time";
  }
  return text;
}

// The key is never asked a passphrase for: OpenSSL's default would prompt on the terminal (or
// read standard input), and a shard would wait there for good. With an empty one an encrypted
// key fails to load at once.
std::string no_passphrase(std::size_t, ssl::context::password_purpose) { return {}; }

}  // namespace

std::string client_certificate_validity_problem(const client_identity& identity, std::time_t now) {
  if (!identity.context) return {};
  X509* cert = SSL_CTX_get0_certificate(identity.context->native_handle());
  if (cert == nullptr) return {};
  // X509_cmp_time: -1 when the time is at or before `now`, 1 when after, 0 on error.
  const ASN1_TIME* not_before = X509_get0_notBefore(cert);
  const ASN1_TIME* not_after = X509_get0_notAfter(cert);
  const int started = X509_cmp_time(not_before, &now);
  const int ends = X509_cmp_time(not_after, &now);
  if (started == 0 || ends == 0) {
    return "client certificate " + identity.cert_file + " has unreadable validity dates";
  }
  if (started > 0) {
    return "client certificate " + identity.cert_file + " is not valid until " +
           printable_time(not_before);
  }
  if (ends < 0) {
    return "client certificate " + identity.cert_file + " expired at " + printable_time(not_after);
  }
  return {};
}

std::shared_ptr<const client_identity> load_client_identity(const http_client_config& config,
                                                            const std::string& cert_file,
                                                            const std::string& key_file) {
  const auto cert = read_pem(cert_file, "client certificate");
  const auto key = read_pem(key_file, "client key");
  auto identity = std::make_shared<client_identity>();
  identity->key = digest_of(cert, key);
  identity->cert_file = cert_file;
  identity->key_file = key_file;
  identity->context = make_client_tls_context(config);
  boost::system::error_code ec;
  identity->context->set_password_callback(no_passphrase, ec);
  if (ec) throw std::runtime_error("cannot set up a TLS context: " + ec.message());
  identity->context->use_certificate_chain(boost::asio::buffer(cert), ec);
  if (ec) {
    throw std::runtime_error("client certificate " + cert_file +
                             " is not a usable PEM certificate: " + ec.message());
  }
  identity->context->use_private_key(boost::asio::buffer(key), ssl::context::pem, ec);
  if (ec) {
    ERR_clear_error();
    // OpenSSL compares the key with the certificate as it loads it.
    if (ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH) {
      throw std::runtime_error("client key " + key_file + " does not match client certificate " +
                               cert_file);
    }
    // Both PEM forms of an encrypted key say so: "BEGIN ENCRYPTED PRIVATE KEY" (PKCS #8) and
    // "Proc-Type: 4,ENCRYPTED" (the traditional one).
    if (key.find("ENCRYPTED") != std::string::npos) {
      throw std::runtime_error("client key " + key_file +
                               " is encrypted; encrypted keys are not supported (nothing can "
                               "type its passphrase): store it decrypted, readable only by the "
                               "drain's user (" +
                               ec.message() + ")");
    }
    throw std::runtime_error("client key " + key_file +
                             " is not a usable PEM private key: " + ec.message());
  }
  if (SSL_CTX_check_private_key(identity->context->native_handle()) != 1) {
    ERR_clear_error();
    throw std::runtime_error("client key " + key_file + " does not match client certificate " +
                             cert_file);
  }
  if (auto problem = client_certificate_validity_problem(*identity, std::time(nullptr));
      !problem.empty()) {
    throw std::runtime_error(problem);
  }
  return identity;
}

client_identities::found client_identities::get(const std::string& cert_file,
                                                const std::string& key_file, std::time_t now) {
  if (cert_file.empty() && key_file.empty()) return {};
  if (cert_file.empty() || key_file.empty()) {
    return {nullptr, cert_file.empty() ? "a client key is set without a client certificate"
                                       : "a client certificate is set without a client key"};
  }
  auto& slot = by_files_[{cert_file, key_file}];
  try {
    // Read again each time: a rotated file is used from the next reload on, and an unchanged
    // one keeps its context, its connections and its sessions.
    const auto cert = read_pem(cert_file, "client certificate");
    const auto key = read_pem(key_file, "client key");
    if (!slot || slot->key != digest_of(cert, key)) {
      slot.reset();
      slot = load_client_identity(config_, cert_file, key_file);
    }
  } catch (const std::exception& error) {
    return {nullptr, error.what()};
  }
  // Checked at every use, not only at loading: a certificate that was valid when loaded expires
  // while the drain runs, and every handshake with it would then fail.
  if (auto problem = client_certificate_validity_problem(*slot, now); !problem.empty()) {
    return {nullptr, std::move(problem)};
  }
  return {slot, {}};
}

}  // namespace surge::engine
