#include "tests/support/test_pki.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace surge::testing {

namespace {

void run_shell(const std::string& command, const std::filesystem::path& log) {
  const std::string full = command + " >>'" + log.string() + "' 2>&1";
  if (std::system(full.c_str()) != 0) {
    std::ifstream in(log);
    std::ostringstream text;
    text << in.rdbuf();
    throw std::runtime_error("command failed: " + command + "\n" + text.str());
  }
}

}  // namespace

test_pki make_test_pki(const std::filesystem::path& dir) {
  const auto at = [&](const char* name) { return (dir / name).string(); };
  const std::filesystem::path log = dir / "openssl.log";
  const std::string openssl = SURGE_OPENSSL_PATH;
  const std::string ec_key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  {
    std::ofstream ext(at("server.ext"));
    ext << "basicConstraints=CA:FALSE\n"
           "keyUsage=critical,digitalSignature\n"
           "extendedKeyUsage=serverAuth\n"
           "subjectAltName=DNS:localhost,IP:127.0.0.1\n";
  }
  run_shell(openssl + " req -x509" + ec_key + " -keyout '" + at("ca.key") + "' -out '" +
                at("ca.crt") + "' -days 2 -subj '/CN=surge test CA'" +
                " -addext basicConstraints=critical,CA:TRUE" +
                " -addext keyUsage=critical,keyCertSign,cRLSign",
            log);
  run_shell(openssl + " req -new" + ec_key + " -keyout '" + at("server.key") + "' -out '" +
                at("server.csr") + "' -subj '/CN=localhost'",
            log);
  run_shell(openssl + " x509 -req -in '" + at("server.csr") + "' -CA '" + at("ca.crt") +
                "' -CAkey '" + at("ca.key") + "' -CAcreateserial -out '" + at("server.crt") +
                "' -days 2 -extfile '" + at("server.ext") + "'",
            log);
  return {at("ca.crt"), at("server.crt"), at("server.key")};
}

}  // namespace surge::testing
