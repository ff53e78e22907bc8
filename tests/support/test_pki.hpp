#pragma once
// A throwaway PKI made with the openssl CLI: a CA and a server certificate for localhost and
// 127.0.0.1 signed by it, so TLS tests run real handshakes with real verification.
#include <filesystem>
#include <string>

namespace surge::testing {

struct test_pki {
  std::string ca_cert, server_cert, server_key;
  std::string ca_key;  // for signing further certificates (make_expired_cert)
};

// Writes the files into `dir`. Throws std::runtime_error with openssl's output on failure.
test_pki make_test_pki(const std::filesystem::path& dir);

struct test_certificate {
  std::string cert, key;
};

// A TLS client certificate (extendedKeyUsage clientAuth) for `name`, signed by the test CA:
// files `name`.crt and `name`.key in `dir`.
test_certificate make_client_cert(const std::filesystem::path& dir, const test_pki& pki,
                                  const std::string& name);

// A certificate for localhost and 127.0.0.1 that signs itself: no CA vouches for it.
test_certificate make_self_signed_cert(const std::filesystem::path& dir);

// A certificate for localhost and 127.0.0.1 from the test CA whose validity ended in 2020
// (`openssl ca -startdate/-enddate`: OpenSSL 3.0's `x509 -req` cannot backdate).
test_certificate make_expired_cert(const std::filesystem::path& dir, const test_pki& pki);

// A certificate for localhost from the test CA valid from `not_before` to `not_after`
// (`openssl ca` dates: YYMMDDHHMMSSZ or YYYYMMDDHHMMSSZ, UTC): files `name`.crt and `name`.key.
test_certificate make_cert_valid_between(const std::filesystem::path& dir, const test_pki& pki,
                                         const std::string& name, const std::string& not_before,
                                         const std::string& not_after);

// `key_file` encrypted with AES-256 under the passphrase "x" (PKCS #8 PEM), written as `name`.
std::string make_encrypted_key(const std::filesystem::path& dir, const std::string& key_file,
                               const std::string& name);

}  // namespace surge::testing
