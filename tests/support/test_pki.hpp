#pragma once
// A throwaway PKI made with the openssl CLI: a CA and a server certificate for localhost and
// 127.0.0.1 signed by it, so TLS tests run real handshakes with real verification.
#include <filesystem>
#include <string>

namespace surge::testing {

struct test_pki {
  std::string ca_cert, server_cert, server_key;
};

// Writes the files into `dir`. Throws std::runtime_error with openssl's output on failure.
test_pki make_test_pki(const std::filesystem::path& dir);

}  // namespace surge::testing
