#include "proto/signing.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace surge::proto {
namespace {

std::string hex(const sha256_digest& digest) { return to_lower_hex(digest); }

std::span<const unsigned char> bytes_of(std::string_view text) {
  return {reinterpret_cast<const unsigned char*>(text.data()), text.size()};
}

// The reference implementation: the openssl command line tool, run on a file holding the exact
// signed bytes so that no shell quoting touches the payload.
std::string openssl_cli_hmac(const std::string& key, const std::string& message) {
  EXPECT_EQ(key.find('\''), std::string::npos) << "key must be single-quote safe";
  char path[] = "/tmp/surge_proto_hmac_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return "mkstemp failed";
  const bool written =
      write(fd, message.data(), message.size()) == static_cast<ssize_t>(message.size());
  close(fd);
  std::string output;
  if (written) {
    const std::string command = "openssl dgst -sha256 -hmac '" + key + "' " + path;
    if (FILE* pipe = popen(command.c_str(), "r")) {
      char buffer[256];
      while (std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
      pclose(pipe);
    }
  }
  unlink(path);
  // "HMAC-SHA2-256(<path>)= <hex>\n"
  const std::size_t equals = output.rfind("= ");
  if (equals == std::string::npos) return "unexpected openssl output: " + output;
  std::string digest = output.substr(equals + 2);
  while (!digest.empty() && (digest.back() == '\n' || digest.back() == '\r')) digest.pop_back();
  return digest;
}

signed_fields sign(signing_scheme scheme, std::string_view secret, std::string_view id,
                   std::int64_t ts, std::string_view payload) {
  const auto s = signer::create(scheme, secret);
  EXPECT_TRUE(s.has_value());
  return s ? s->sign(id, ts, payload) : signed_fields{};
}

TEST(signing, hmac_rfc4231_case_2) {
  EXPECT_EQ(hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(signing, hmac_rfc4231_case_6_key_longer_than_a_block) {
  EXPECT_EQ(hex(hmac_sha256(std::string(131, '\xaa'),
                            "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(signing, hmac_with_an_empty_key) {
  // printf '' | openssl dgst -sha256 -hmac ''
  EXPECT_EQ(hex(hmac_sha256("", "")),
            "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}

TEST(signing, lower_hex) {
  const unsigned char bytes[] = {0x00, 0x0f, 0xa0, 0xff};
  EXPECT_EQ(to_lower_hex(bytes), "000fa0ff");
  EXPECT_EQ(to_lower_hex({}), "");
}

TEST(signing, base64_rfc4648_vectors) {
  const std::pair<std::string_view, std::string_view> vectors[] = {{"", ""},
                                                                   {"f", "Zg=="},
                                                                   {"fo", "Zm8="},
                                                                   {"foo", "Zm9v"},
                                                                   {"foob", "Zm9vYg=="},
                                                                   {"fooba", "Zm9vYmE="},
                                                                   {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(base64_encode(bytes_of(plain)), encoded);
    EXPECT_EQ(base64_decode(encoded), std::string(plain)) << encoded;
  }
}

TEST(signing, base64_round_trips_random_bytes) {
  std::mt19937_64 rng(7);
  for (std::size_t size = 0; size < 70; ++size) {
    std::string data(size, '\0');
    for (char& c : data) c = static_cast<char>(rng() & 0xff);
    EXPECT_EQ(base64_decode(base64_encode(bytes_of(data))), data) << size;
  }
}

TEST(signing, base64_rejects_bad_input) {
  for (std::string_view bad :
       {"Zg", "Zg=", "Zm9", "Z===", "====", "Zm9v!", "Zm=v", "=Zm9", "Zg==Zg==", "Zm9v\n", " Zm9v",
        "Zm 9v", "-_8A", "Zm9vYg=A", "Zm9vY===", "Zm9vYg==="}) {
    EXPECT_FALSE(base64_decode(bad).has_value()) << bad;
  }
}

TEST(signing, scheme_names) {
  EXPECT_EQ(parse_signing_scheme("vvv"), signing_scheme::vvv);
  EXPECT_EQ(parse_signing_scheme("standard"), signing_scheme::standard);
  EXPECT_EQ(parse_signing_scheme("Standard"), signing_scheme::standard);
  EXPECT_FALSE(parse_signing_scheme("").has_value());
  EXPECT_FALSE(parse_signing_scheme("hmac").has_value());
  EXPECT_FALSE(parse_signing_scheme(" vvv").has_value());
  EXPECT_EQ(to_string(signing_scheme::vvv), "vvv");
  EXPECT_EQ(to_string(signing_scheme::standard), "standard");
}

TEST(signing, standard_known_answers) {
  auto f = sign(signing_scheme::standard, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, R"({"test": 2432232314})");
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f.name(0), "webhook-id");
  EXPECT_EQ(f.value(0), "msg_p5jXN8AQM9LWM0D4loKWxJek");
  EXPECT_EQ(f.name(1), "webhook-timestamp");
  EXPECT_EQ(f.value(1), "1614265330");
  EXPECT_EQ(f.name(2), "webhook-signature");
  EXPECT_EQ(f.value(2), "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");

  f = sign(signing_scheme::standard, "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
           "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk", 1649367553,
           R"({"email":"test@example.com","username":"test_user"})");
  EXPECT_EQ(f.value(2), "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=");
}

TEST(signing, standard_accepts_secret_without_prefix) {
  const auto with = sign(signing_scheme::standard, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                         "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, R"({"test": 2432232314})");
  const auto without = sign(signing_scheme::standard, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                            "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, R"({"test": 2432232314})");
  EXPECT_EQ(without.value(2), with.value(2));
}

TEST(signing, standard_rotation_signs_with_every_key) {
  const std::string a = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  const std::string b = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
  const auto one = sign(signing_scheme::standard, a, "msg_1", 1700000000, "{}");
  const auto two = sign(signing_scheme::standard, b, "msg_1", 1700000000, "{}");
  const auto both = sign(signing_scheme::standard, a + " " + b, "msg_1", 1700000000, "{}");
  EXPECT_EQ(both.value(2), std::string(one.value(2)) + " " + std::string(two.value(2)));
  // Doubled separators are tolerated.
  const auto spaced =
      sign(signing_scheme::standard, "  " + a + "   " + b + " ", "msg_1", 1700000000, "{}");
  EXPECT_EQ(spaced.value(2), both.value(2));
}

// Eight keys' signatures do not fit in the fields' own storage: the text moves to the heap,
// and the fields written before the move must still read right.
TEST(signing, standard_rotation_past_the_inline_text_keeps_every_field) {
  const std::string a = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  const std::string b = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
  const std::string id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
  const auto one = sign(signing_scheme::standard, a, id, 1614265330, "{}");
  const auto two = sign(signing_scheme::standard, b, id, 1614265330, "{}");
  std::string secret;
  std::string expected;
  for (int i = 0; i < 4; ++i) {
    secret += a + " " + b + " ";
    if (!expected.empty()) expected += " ";
    expected += std::string(one.value(2)) + " " + std::string(two.value(2));
  }
  const auto many = sign(signing_scheme::standard, secret, id, 1614265330, "{}");
  ASSERT_EQ(many.size(), 3u);
  EXPECT_GT(expected.size(), 240u);
  EXPECT_EQ(many.value(0), id);
  EXPECT_EQ(many.value(1), "1614265330");
  EXPECT_EQ(many.value(2), expected);
  const auto copied = many;
  EXPECT_EQ(copied.value(2), expected);
}

TEST(signing, create_rejects_unusable_secrets) {
  std::string error;
  EXPECT_FALSE(signer::create(signing_scheme::vvv, "", &error).has_value());
  EXPECT_EQ(error, "empty secret");
  for (std::string_view bad : {"", "   ", "whsec_", "whsec_!!!!", "whsec_abc",
                               "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw whsec_%%%%"}) {
    error.clear();
    EXPECT_FALSE(signer::create(signing_scheme::standard, bad, &error).has_value()) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
  signer::create(signing_scheme::standard, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw whsec_%%%%",
                 &error);
  EXPECT_EQ(error, "secret 2 is not whsec_<base64>");
  EXPECT_FALSE(signer::create(signing_scheme::standard, "whsec_abc").has_value());  // no out
}

// openssl dgst -sha256 -hmac 'surge-test-secret' <file holding:
//   1700000000.{"event":"video.trending","id":42}>
TEST(signing, vvv_hard_coded_cli_vector_1) {
  const auto f = sign(signing_scheme::vvv, "surge-test-secret", "ignored", 1700000000,
                      R"({"event":"video.trending","id":42})");
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f.name(0), "X-VVV-Timestamp");
  EXPECT_EQ(f.value(0), "1700000000");
  EXPECT_EQ(f.name(1), "X-VVV-Signature");
  EXPECT_EQ(f.value(1), "sha256=5fd9f97a63899f134f14d100bc0ac2f970e7f5875702edf141f0eb26236de1d5");
}

// openssl dgst -sha256 -hmac 'k3y with spaces!' <file holding:
//   1614265330.{"test": 2432232314}>
TEST(signing, vvv_hard_coded_cli_vector_2) {
  const auto f =
      sign(signing_scheme::vvv, "k3y with spaces!", "", 1614265330, R"({"test": 2432232314})");
  EXPECT_EQ(f.value(1), "sha256=bda15c658337f3ec8c574812c05a5c3071b9ecde6700ea09703fd86b296349c8");
}

TEST(signing, vvv_matches_openssl_cli) {
  std::mt19937_64 rng(2024);
  // The last three: a whole SHA-256 block, one byte more (hashed first), and much longer.
  const std::string keys[] = {"surge-test-secret",  "k3y with spaces!",   "x",
                              std::string(64, 'b'), std::string(65, 'c'), std::string(100, 'k')};
  std::string big(4096, '\0');
  for (char& c : big) c = static_cast<char>(rng() & 0xff);
  const std::string payloads[] = {"", "{}", R"({"video":"\u00e9t\u00e9","views":1e9})",
                                  "line\nbreak\r\n\ttab \"quotes\" 'single'", big};
  std::int64_t ts = 1700000000;
  for (const auto& key : keys) {
    for (const auto& payload : payloads) {
      ++ts;
      const auto f = sign(signing_scheme::vvv, key, "", ts, payload);
      const std::string expected = openssl_cli_hmac(key, std::to_string(ts) + "." + payload);
      ASSERT_EQ(expected.size(), 64u) << expected;
      EXPECT_EQ(f.value(1), "sha256=" + expected) << key << " / " << payload.size();
    }
  }
}

TEST(signing, verify_vvv) {
  const std::string payload = R"({"event":"video.trending","id":42})";
  const auto f = sign(signing_scheme::vvv, "surge-test-secret", "", 1700000000, payload);
  const std::string header(f.value(1));
  EXPECT_TRUE(verify_vvv("surge-test-secret", "1700000000", payload, header));
  EXPECT_FALSE(verify_vvv("surge-test-secreT", "1700000000", payload, header));
  EXPECT_FALSE(verify_vvv("", "1700000000", payload, header));
  EXPECT_FALSE(verify_vvv("surge-test-secret", "1700000000", payload + " ", header));
  EXPECT_FALSE(verify_vvv("surge-test-secret", "1700000001", payload, header));

  std::string upper = header;
  for (std::size_t i = 7; i < upper.size(); ++i)
    upper[i] = static_cast<char>(std::toupper(upper[i]));
  EXPECT_TRUE(verify_vvv("surge-test-secret", "1700000000", payload, upper));

  const std::string digest = header.substr(7);
  for (const std::string& bad : std::vector<std::string>{
           std::string(), digest, "sha256=", "sha1=" + digest, "SHA256=" + digest,
           "sha256=" + digest.substr(2), "sha256=" + digest + "00", "sha256=" + digest.substr(1),
           "sha256=" + digest.substr(0, 63) + "g", " sha256=" + digest, "sha256= " + digest}) {
    EXPECT_FALSE(verify_vvv("surge-test-secret", "1700000000", payload, bad)) << bad;
  }
}

TEST(signing, verify_standard) {
  const std::string secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  const std::string other = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
  const std::string id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
  const std::string body = R"({"test": 2432232314})";
  const std::string header = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
  EXPECT_TRUE(verify_standard(secret, id, "1614265330", body, header));
  EXPECT_FALSE(verify_standard(other, id, "1614265330", body, header));
  EXPECT_FALSE(verify_standard(secret, id, "1614265330", body + "\n", header));
  EXPECT_FALSE(verify_standard(secret, id, "1614265331", body, header));
  EXPECT_FALSE(verify_standard(secret, id + "x", "1614265330", body, header));
  EXPECT_FALSE(verify_standard("", id, "1614265330", body, header));
  EXPECT_FALSE(verify_standard("whsec_!!", id, "1614265330", body, header));

  const std::string sig = header.substr(3);
  for (const std::string& bad : std::vector<std::string>{
           std::string(), sig, "v1,", "v1", "v2," + sig, "v1a," + sig, "v1," + sig.substr(4),
           "v1,!" + sig.substr(1), "v1," + sig + "AAAA", "v1;" + sig}) {
    EXPECT_FALSE(verify_standard(secret, id, "1614265330", body, bad)) << bad;
  }
  // Other versions and junk next to a valid entry do not hide it.
  EXPECT_TRUE(verify_standard(secret, id, "1614265330", body, "v2,abc v1,!!! " + header));
}

TEST(signing, verify_standard_rotation) {
  const std::string old_key = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
  const std::string new_key = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  const std::string id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
  const std::string body = R"({"test": 2432232314})";
  const std::string new_sig = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
  // The receiver holds two keys; the sender signed with the second only.
  EXPECT_TRUE(verify_standard(old_key + " " + new_key, id, "1614265330", body, new_sig));
  // The sender rotates and signs with both; a receiver with either key accepts.
  const auto both = sign(signing_scheme::standard, old_key + " " + new_key, id, 1614265330, body);
  EXPECT_TRUE(verify_standard(new_key, id, "1614265330", body, both.value(2)));
  EXPECT_TRUE(verify_standard(old_key, id, "1614265330", body, both.value(2)));
  EXPECT_FALSE(verify_standard("whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", id, "1614265330", body,
                               both.value(2)));
}

// python3 -c "import hmac,hashlib; print(hmac.new(b'seed001-secret', b'{\"video\":\"v1\"}',
//   hashlib.sha256).hexdigest())": what a producer of the stored-signature shape stores.
constexpr std::string_view stored_answer =
    "c8281e5b2caf086aed23f95ad920c1f0bdd0acdda9ae39ab75912cca8a586f06";

TEST(signing, stored_signature_is_the_hex_hmac_of_the_payload_alone) {
  EXPECT_EQ(stored_signature_for("seed001-secret", R"({"video":"v1"})"), stored_answer);
  EXPECT_EQ(stored_signature_for("key", "The quick brown fox jumps over the lazy dog"),
            "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8");
}

TEST(signing, stored_sends_the_stored_hex_verbatim_whatever_the_time_or_secret) {
  // The secret is not used to send: a retry carries the signature made at enqueue.
  const auto stored = signer::create(signing_scheme::stored, "another-secret");
  ASSERT_TRUE(stored.has_value());
  for (const std::int64_t ts : {std::int64_t{1}, std::int64_t{1700000000}}) {
    const auto f = stored->sign("msg_7", ts, R"({"video":"v2"})", stored_answer);
    ASSERT_EQ(f.size(), 1u);
    EXPECT_EQ(f.name(0), "X-VVV-Signature");
    EXPECT_EQ(f.value(0), stored_answer);
  }
  EXPECT_TRUE(signer::create(signing_scheme::stored, "").has_value());
  EXPECT_EQ(parse_signing_scheme("stored"), signing_scheme::stored);
  EXPECT_EQ(to_string(signing_scheme::stored), "stored");
}

TEST(signing, stored_signatures_that_are_not_64_lowercase_hex_are_refused) {
  EXPECT_EQ(stored_signature_problem(stored_answer), "");
  EXPECT_EQ(stored_signature_problem(""), "missing stored signature");
  std::string upper(stored_answer);
  for (char& c : upper) c = static_cast<char>(std::toupper(c));
  const std::string answer(stored_answer);
  for (const std::string& bad :
       {upper, answer.substr(1), answer + "0", "sha256=" + answer, answer.substr(0, 63) + "g",
        " " + answer.substr(1), answer.substr(0, 63) + "\n", std::string(64, 'z')}) {
    const auto problem = stored_signature_problem(bad);
    EXPECT_TRUE(problem.starts_with("stored signature is not 64 lowercase hex characters"))
        << bad << ": " << problem;
    const auto signer = signer::create(signing_scheme::stored, "s");
    EXPECT_THROW(signer->sign("msg_1", 1, "{}", bad), std::invalid_argument) << bad;
  }
  // The message never quotes the value: another program wrote it.
  EXPECT_EQ(stored_signature_problem("\r\nX-Evil: 1"),
            "stored signature is not 64 lowercase hex characters (11 characters, not all "
            "lowercase hex)");
  EXPECT_THROW(signer::create(signing_scheme::stored, "s")->sign("msg_1", 1, "{}", ""),
               std::invalid_argument);
}

TEST(signing, verify_stored) {
  const std::string payload = R"({"video":"v1"})";
  const std::string answer(stored_answer);
  EXPECT_TRUE(verify_stored("seed001-secret", payload, answer));
  EXPECT_FALSE(verify_stored("seed001-secreT", payload, answer));
  EXPECT_FALSE(verify_stored("", payload, answer));
  EXPECT_FALSE(verify_stored("seed001-secret", payload + " ", answer));
  std::string upper = answer;
  for (char& c : upper) c = static_cast<char>(std::toupper(c));
  for (const std::string& bad :
       {std::string(), upper, "sha256=" + answer, answer + "00", answer.substr(2), " " + answer}) {
    EXPECT_FALSE(verify_stored("seed001-secret", payload, bad)) << bad;
  }
  // A vvv signature over the same payload is not a stored one.
  const auto vvv = sign(signing_scheme::vvv, "seed001-secret", "", 1700000000, payload);
  EXPECT_FALSE(verify_stored("seed001-secret", payload, vvv.value(1)));
  EXPECT_FALSE(verify_stored("seed001-secret", payload, vvv.value(1).substr(7)));
  EXPECT_EQ(problem_with_new_secret(signing_scheme::stored, ""), "empty secret");
  EXPECT_EQ(problem_with_new_secret(signing_scheme::stored, "any text at all"), "");
}

TEST(signing, new_secrets_for_standard_must_be_whsec_keys_of_24_to_64_bytes) {
  using proto::problem_with_new_secret;
  using proto::signing_scheme;
  EXPECT_EQ(
      problem_with_new_secret(signing_scheme::standard, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
      "");
  EXPECT_EQ(problem_with_new_secret(signing_scheme::standard,
                                    proto::generate_secret(signing_scheme::standard)),
            "");
  // Bare base64 works at drain time but is refused at the door, as is a short key.
  EXPECT_NE(problem_with_new_secret(signing_scheme::standard, "notwhsec"), "");
  EXPECT_NE(problem_with_new_secret(signing_scheme::standard, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
            "");
  EXPECT_NE(problem_with_new_secret(signing_scheme::standard, "whsec_c2hvcnQ="), "");
  EXPECT_NE(problem_with_new_secret(signing_scheme::standard,
                                    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw notwhsec"),
            "");
  EXPECT_NE(problem_with_new_secret(signing_scheme::standard, "whsec_!!!"), "");
  EXPECT_EQ(problem_with_new_secret(signing_scheme::vvv, "anything"), "");
  EXPECT_NE(problem_with_new_secret(signing_scheme::vvv, ""), "");
}

TEST(signing, generate_secret) {
  const std::string a = generate_secret(signing_scheme::vvv);
  const std::string b = generate_secret(signing_scheme::vvv);
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);
  EXPECT_TRUE(signer::create(signing_scheme::vvv, a).has_value());

  const std::string s = generate_secret(signing_scheme::standard);
  ASSERT_TRUE(s.starts_with("whsec_"));
  const auto key = base64_decode(std::string_view(s).substr(6));
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(key->size(), 32u);
  EXPECT_NE(s, generate_secret(signing_scheme::standard));
  const auto f = sign(signing_scheme::standard, s, "msg_1", 1, "{}");
  EXPECT_TRUE(verify_standard(s, "msg_1", "1", "{}", f.value(2)));
}

}  // namespace
}  // namespace surge::proto
