#pragma once
// TLS client certificates for partners that require mutual TLS. A subscriber names a PEM
// certificate (chain) file and a PEM key file; its connections present them. Each identity has
// its own TLS context, and the HTTP client keys its connection pools and resumption sessions by
// the identity as well as the origin, so a connection or session made with one certificate never
// carries a request of a subscriber with another one, or with none.
#include <cstddef>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include <boost/asio/ssl/context.hpp>

#include "engine/config.hpp"

namespace surge::engine {

struct client_identity {
  // A SHA-256 digest (hex) of the certificate and key files' contents: the same files give the
  // same key, a rotated file a new one (so connections made with the old certificate are not
  // reused for the new one).
  std::string key;
  std::string cert_file, key_file;
  std::shared_ptr<boost::asio::ssl::context> context;
};

// Builds the identity's context: make_client_tls_context's (peer verification, TLS 1.2 minimum,
// session callback) plus the certificate chain and key. Throws std::runtime_error naming the
// file and what is wrong: unreadable, not PEM, an encrypted key (no passphrase is ever asked
// for), a key that does not match the certificate, or a certificate outside its validity
// period.
std::shared_ptr<const client_identity> load_client_identity(const http_client_config& config,
                                                            const std::string& cert_file,
                                                            const std::string& key_file);

// Why the identity's certificate cannot be presented at `now` (not yet valid, or expired, by
// its notBefore/notAfter), or empty. Partners refuse such a certificate in the handshake, so
// every attempt with it would fail.
std::string client_certificate_validity_problem(const client_identity& identity, std::time_t now);

// One shard's identities by file pair. get() reads both files each time it is asked (on every
// subscriber reload: two small reads) and builds a new context only when their contents
// changed. The certificate's validity period is checked at every get(), as time passes. Not
// thread-safe: each shard has its own.
class client_identities {
 public:
  explicit client_identities(http_client_config config) : config_(std::move(config)) {}

  struct found {
    std::shared_ptr<const client_identity> identity;  // null when none is configured or on error
    std::string problem;  // why the configured files cannot be used; empty if fine
  };
  // Neither file named: no identity. One without the other is a problem. The certificate must
  // be valid at `now`.
  found get(const std::string& cert_file, const std::string& key_file, std::time_t now);
  std::size_t size() const { return by_files_.size(); }

 private:
  http_client_config config_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<const client_identity>> by_files_;
};

}  // namespace surge::engine
