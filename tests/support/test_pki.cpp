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
  return {at("ca.crt"), at("server.crt"), at("server.key"), at("ca.key")};
}

namespace {
constexpr const char* server_extensions =
    "basicConstraints=CA:FALSE\n"
    "keyUsage=critical,digitalSignature\n"
    "extendedKeyUsage=serverAuth\n"
    "subjectAltName=DNS:localhost,IP:127.0.0.1\n";
constexpr const char* ec_key_options = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
}  // namespace

test_certificate make_client_cert(const std::filesystem::path& dir, const test_pki& pki,
                                  const std::string& name) {
  const auto at = [&](const std::string& file) { return (dir / file).string(); };
  const std::filesystem::path log = dir / "openssl.log";
  const std::string openssl = SURGE_OPENSSL_PATH;
  {
    std::ofstream ext(at(name + ".ext"));
    ext << "basicConstraints=CA:FALSE\n"
           "keyUsage=critical,digitalSignature\n"
           "extendedKeyUsage=clientAuth\n";
  }
  run_shell(openssl + " req -new" + ec_key_options + " -keyout '" + at(name + ".key") + "' -out '" +
                at(name + ".csr") + "' -subj '/CN=" + name + "'",
            log);
  run_shell(openssl + " x509 -req -in '" + at(name + ".csr") + "' -CA '" + pki.ca_cert +
                "' -CAkey '" + pki.ca_key + "' -CAcreateserial -out '" + at(name + ".crt") +
                "' -days 2 -extfile '" + at(name + ".ext") + "'",
            log);
  return {at(name + ".crt"), at(name + ".key")};
}

test_certificate make_self_signed_cert(const std::filesystem::path& dir) {
  const auto at = [&](const char* name) { return (dir / name).string(); };
  const std::string openssl = SURGE_OPENSSL_PATH;
  run_shell(openssl + " req -x509" + ec_key_options + " -keyout '" + at("self-signed.key") +
                "' -out '" + at("self-signed.crt") + "' -days 2 -subj '/CN=localhost'" +
                " -addext subjectAltName=DNS:localhost,IP:127.0.0.1" +
                " -addext extendedKeyUsage=serverAuth",
            dir / "openssl.log");
  return {at("self-signed.crt"), at("self-signed.key")};
}

test_certificate make_cert_valid_between(const std::filesystem::path& dir, const test_pki& pki,
                                         const std::string& name, const std::string& not_before,
                                         const std::string& not_after) {
  const auto at = [&](const std::string& file) { return (dir / file).string(); };
  const std::filesystem::path log = dir / "openssl.log";
  const std::string openssl = SURGE_OPENSSL_PATH;
  std::filesystem::create_directories(dir / "ca-new");
  std::ofstream(at("ca-index.txt")).close();
  std::ofstream(at("ca-serial")) << "1000\n";
  {
    std::ofstream config(at("ca.cnf"));
    config << "[ca]\ndefault_ca = test_ca\n"
              "[test_ca]\n"
              "database = "
           << at("ca-index.txt")
           << "\n"
              "new_certs_dir = "
           << at("ca-new")
           << "\n"
              "serial = "
           << at("ca-serial")
           << "\n"
              "default_md = sha256\npolicy = any_name\nunique_subject = no\n"
              "copy_extensions = none\n"
              "[any_name]\ncommonName = supplied\n"
              "[server_ext]\n"
           << server_extensions;
  }
  run_shell(openssl + " req -new" + ec_key_options + " -keyout '" + at(name + ".key") + "' -out '" +
                at(name + ".csr") + "' -subj '/CN=localhost'",
            log);
  run_shell(openssl + " ca -batch -notext -config '" + at("ca.cnf") + "' -cert '" + pki.ca_cert +
                "' -keyfile '" + pki.ca_key + "' -in '" + at(name + ".csr") + "' -out '" +
                at(name + ".crt") + "' -startdate " + not_before + " -enddate " + not_after +
                " -extensions server_ext",
            log);
  return {at(name + ".crt"), at(name + ".key")};
}

test_certificate make_expired_cert(const std::filesystem::path& dir, const test_pki& pki) {
  return make_cert_valid_between(dir, pki, "expired", "200101000000Z", "200102000000Z");
}

std::string make_encrypted_key(const std::filesystem::path& dir, const std::string& key_file,
                               const std::string& name) {
  const auto out = (dir / name).string();
  run_shell(std::string(SURGE_OPENSSL_PATH) + " pkey -in '" + key_file +
                "' -aes256 -passout pass:x -out '" + out + "'",
            dir / "openssl.log");
  return out;
}

}  // namespace surge::testing
