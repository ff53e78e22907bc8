#include <gtest/gtest.h>

#include "tools/sink/request_handler.hpp"
#include "tools/sink/verdict.hpp"

namespace surge::sink {
namespace {

// The Standard Webhooks known answer (docs/design.md, "Signing").
const subscriber_key standard_key{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "standard"};
constexpr std::string_view known_body = R"({"test": 2432232314})";

signature_headers known_standard() {
  signature_headers h;
  h.standard_id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
  h.standard_timestamp = "1614265330";
  h.standard_signature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
  return h;
}

TEST(Judge, StandardKnownAnswerIsOk) {
  EXPECT_EQ(judge(&standard_key, known_standard(), known_body), verdict::ok);
}

TEST(Judge, StandardRotationListIsOkWhenAnyMatches) {
  auto h = known_standard();
  h.standard_signature =
      "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= "
      "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
  EXPECT_EQ(judge(&standard_key, h, known_body), verdict::ok);
}

TEST(Judge, TamperedBodyIsBad) {
  EXPECT_EQ(judge(&standard_key, known_standard(), R"({"test": 2432232315})"), verdict::bad);
}

TEST(Judge, StandardWithoutIdIsBad) {
  auto h = known_standard();
  h.standard_id.reset();
  EXPECT_EQ(judge(&standard_key, h, known_body), verdict::bad);
}

TEST(Judge, SchemeOtherThanConfiguredIsBad) {
  const subscriber_key vvv_key{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "vvv"};
  EXPECT_EQ(judge(&vvv_key, known_standard(), known_body), verdict::bad);
}

TEST(Judge, NoSignatureIsMissingAndNoSubscriberIsUnknown) {
  EXPECT_EQ(judge(&standard_key, {}, known_body), verdict::missing);
  EXPECT_EQ(judge(nullptr, known_standard(), known_body), verdict::unknown_subscriber);
}

TEST(Judge, VvvSignature) {
  const subscriber_key key{"secret", "vvv"};
  signature_headers h;
  h.vvv_timestamp = "1700000000";
  // HMAC-SHA256("secret", "1700000000.{}"), computed with the openssl CLI.
  h.vvv_signature = "sha256=b8569b78799ff9e3cbff0fc2d63a33a2b57f3282abd07c37ae5e8e7d79a5f163";
  EXPECT_EQ(judge(&key, h, "{}"), verdict::ok);
  EXPECT_EQ(judge(&key, h, "{ }"), verdict::bad);
  h.vvv_timestamp = "1700000001";
  EXPECT_EQ(judge(&key, h, "{}"), verdict::bad);
  h.vvv_timestamp.reset();
  EXPECT_EQ(judge(&key, h, "{}"), verdict::bad);
}

TEST(SubscriberSegment, TakesTheLastPathSegment) {
  EXPECT_EQ(subscriber_segment("/hook/3"), "3");
  EXPECT_EQ(subscriber_segment("/a/b/c/42?x=1"), "42");
  EXPECT_EQ(subscriber_segment("/hook/"), "");
  EXPECT_EQ(subscriber_segment("7"), "7");
}

}  // namespace
}  // namespace surge::sink
