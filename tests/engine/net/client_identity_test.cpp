// Loading a subscriber's TLS client certificate and key: what is refused at once, with a reason
// the drain logs and the CLI prints, instead of a prompt or a handshake that fails every time.
#include "engine/net/client_identity.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <stdexcept>
#include <string>

#include <openssl/ssl.h>

#include "tests/support/temp_dir.hpp"
#include "tests/support/test_pki.hpp"

namespace surge::engine {
namespace {

// An `openssl ca` date `offset` from now.
std::string ca_date(std::chrono::seconds offset) {
  const std::time_t at = std::time(nullptr) + static_cast<std::time_t>(offset.count());
  std::tm parts{};
  gmtime_r(&at, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%d%H%M%SZ", &parts);
  return text;
}

// Calls load_client_identity and returns what it threw, or "" when it loaded.
std::string load_problem(const std::string& cert, const std::string& key) {
  try {
    load_client_identity(http_client_config{}, cert, key);
    return {};
  } catch (const std::runtime_error& error) {
    return error.what();
  }
}

struct client_identity_test : ::testing::Test {
  testing::temp_dir dir;
  testing::test_pki pki = make_pki();

  testing::test_pki make_pki() {
    std::filesystem::create_directories(dir.file("pki"));
    return testing::make_test_pki(dir.file("pki"));
  }
  std::filesystem::path pki_dir() const { return dir.file("pki"); }
};

TEST_F(client_identity_test, a_valid_pair_loads) {
  const auto client = testing::make_client_cert(pki_dir(), pki, "client");
  EXPECT_EQ(load_problem(client.cert, client.key), "");
  client_identities identities{http_client_config{}};
  const auto found = identities.get(client.cert, client.key, std::time(nullptr));
  EXPECT_TRUE(found.identity);
  EXPECT_EQ(found.problem, "");
}

// No passphrase is ever asked for (the default would prompt on the terminal, or wait on
// standard input, and the shard with it): the key is refused at once, saying why.
TEST_F(client_identity_test, an_encrypted_key_is_refused_at_once_as_encrypted) {
  const auto client = testing::make_client_cert(pki_dir(), pki, "client");
  const auto encrypted = testing::make_encrypted_key(pki_dir(), client.key, "encrypted.key");
  const auto problem = load_problem(client.cert, encrypted);
  EXPECT_NE(problem.find("client key " + encrypted + " is encrypted"), std::string::npos)
      << problem;
  EXPECT_NE(problem.find("not supported"), std::string::npos) << problem;

  client_identities identities{http_client_config{}};
  const auto found = identities.get(client.cert, encrypted, std::time(nullptr));
  EXPECT_FALSE(found.identity);
  EXPECT_NE(found.problem.find("is encrypted"), std::string::npos) << found.problem;

  // What OpenSSL would call for a passphrase is Surge's, and it gives none.
  const auto usable = load_client_identity(http_client_config{}, client.cert, client.key);
  SSL_CTX* context = usable->context->native_handle();
  pem_password_cb* callback = SSL_CTX_get_default_passwd_cb(context);
  ASSERT_NE(callback, nullptr);
  char passphrase[64] = "unchanged";
  EXPECT_EQ(
      callback(passphrase, sizeof passphrase, 0, SSL_CTX_get_default_passwd_cb_userdata(context)),
      0);
}

TEST_F(client_identity_test, an_expired_or_not_yet_valid_certificate_is_refused) {
  const auto expired = testing::make_expired_cert(pki_dir(), pki);
  auto problem = load_problem(expired.cert, expired.key);
  EXPECT_NE(problem.find("client certificate " + expired.cert + " expired at 2020-01-02T00:00:00Z"),
            std::string::npos)
      << problem;

  const auto future = testing::make_cert_valid_between(pki_dir(), pki, "future", "20990101000000Z",
                                                       "20990201000000Z");
  problem = load_problem(future.cert, future.key);
  EXPECT_NE(problem.find("client certificate " + future.cert +
                         " is not valid until 2099-01-01T00:00:00Z"),
            std::string::npos)
      << problem;

  client_identities identities{http_client_config{}};
  for (const auto& cert : {expired, future}) {
    const auto found = identities.get(cert.cert, cert.key, std::time(nullptr));
    EXPECT_FALSE(found.identity) << cert.cert;
    EXPECT_NE(found.problem.find("client certificate " + cert.cert), std::string::npos)
        << found.problem;
  }
}

// A certificate valid when loaded expires while the drain runs: the identity kept for the
// unchanged files is checked again at each use.
TEST_F(client_identity_test, a_cached_identity_that_expires_is_refused_from_then_on) {
  const auto brief =
      testing::make_cert_valid_between(pki_dir(), pki, "brief", ca_date(std::chrono::seconds(-60)),
                                       ca_date(std::chrono::seconds(3)));
  client_identities identities{http_client_config{}};
  const std::time_t now = std::time(nullptr);
  const auto first = identities.get(brief.cert, brief.key, now);
  ASSERT_TRUE(first.identity) << first.problem;
  // Four seconds on, past its end: the same files, the cached context, now refused.
  const auto later = identities.get(brief.cert, brief.key, now + 4);
  EXPECT_FALSE(later.identity);
  EXPECT_NE(later.problem.find("client certificate " + brief.cert + " expired at "),
            std::string::npos)
      << later.problem;
  EXPECT_EQ(client_certificate_validity_problem(*first.identity, now + 4), later.problem);
  EXPECT_EQ(client_certificate_validity_problem(*first.identity, now), "");
}

}  // namespace
}  // namespace surge::engine
