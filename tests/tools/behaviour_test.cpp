#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "tools/sink/behaviour.hpp"
#include "tools/sink/request_handler.hpp"

namespace surge::sink {
namespace {

TEST(BehaviourSet, ParsesTheDocumentedExample) {
  const auto set = behaviour_set::parse(R"({
    "3": {"status": 500}, "4": {"delay_ms": 200}, "5": {"mix": [[200,0.7],[503,0.3]]},
    "6": {"status": 429, "retry_after": "2"}, "7": {"hang": true}, "8": {"reset": true},
    "9": {"status": 503, "retry_after": "Wed, 21 Oct 2015 07:28:00 GMT"},
    "10": {"status": 410}, "11": {"fail_first": 2, "status": 500}, "*": {"delay_ms": 5}})");
  EXPECT_EQ(set.for_subscriber(3).status, 500u);
  EXPECT_EQ(set.for_subscriber(4).delay, std::chrono::milliseconds(200));
  ASSERT_EQ(set.for_subscriber(5).mix.size(), 2u);
  EXPECT_EQ(set.for_subscriber(5).mix[1].first, 503u);
  EXPECT_EQ(set.for_subscriber(6).retry_after, "2");
  EXPECT_TRUE(set.for_subscriber(7).hang);
  EXPECT_TRUE(set.for_subscriber(8).reset);
  EXPECT_EQ(set.for_subscriber(9).retry_after, "Wed, 21 Oct 2015 07:28:00 GMT");
  EXPECT_EQ(set.for_subscriber(11).fail_first, 2);
  EXPECT_EQ(set.for_subscriber(99).delay, std::chrono::milliseconds(5));
  EXPECT_EQ(set.for_subscriber(std::nullopt).delay, std::chrono::milliseconds(5));
}

TEST(BehaviourSet, ParsesTheFaultShapes) {
  const auto set = behaviour_set::parse(R"({
    "1": {"reset_first": 2}, "2": {"trickle_ms": 1000}, "3": {"body_bytes": 104857600},
    "4": {"announce_length": 1000000000000}, "5": {"endless_chunked": true},
    "6": {"status": 302, "location": "http://127.0.0.1:1/x"}})");
  EXPECT_EQ(set.for_subscriber(1).reset_first, 2);
  EXPECT_EQ(set.for_subscriber(2).trickle, std::chrono::milliseconds(1000));
  EXPECT_EQ(set.for_subscriber(3).body_bytes.value_or(0), 104857600u);
  EXPECT_EQ(set.for_subscriber(4).announce_length.value_or(0), 1000000000000u);
  EXPECT_TRUE(set.for_subscriber(5).endless_chunked);
  EXPECT_EQ(set.for_subscriber(6).location, "http://127.0.0.1:1/x");
  EXPECT_FALSE(set.for_subscriber(1).body_bytes.has_value());
}

TEST(BehaviourSet, RejectsFaultShapeMistakes) {
  for (const char* bad :
       {R"({"3": {"reset_first": -1}})", R"({"3": {"trickle_ms": 0}})",
        R"({"3": {"body_bytes": 1.5}})", R"({"3": {"body_bytes": -1}})",
        R"({"3": {"announce_length": "10"}})", R"({"3": {"endless_chunked": 1}})",
        R"({"3": {"location": 5}})", R"({"3": {"body_bytes": 10, "endless_chunked": true}})",
        R"({"3": {"body_bytes": 10, "announce_length": 20}})",
        R"({"3": {"reset_first": 1, "fail_first": 1}})",
        R"({"3": {"reset_first": 1, "reset": true}})"})
    EXPECT_THROW(behaviour_set::parse(bad), std::invalid_argument) << bad;
}

TEST(BehaviourSet, DefaultsToPlain200) {
  const auto set = behaviour_set::parse("{}");
  EXPECT_EQ(set.for_subscriber(1).status, 200u);
  EXPECT_FALSE(set.for_subscriber(1).hang);
}

TEST(BehaviourSet, RejectsMistakes) {
  for (const char* bad :
       {"[]", "{", R"({"x": {}})", R"({"3": {"stauts": 500}})", R"({"3": {"status": 99}})",
        R"({"3": {"status": "500"}})", R"({"3": {"mix": []}})", R"({"3": {"mix": [[200, 0]]}})",
        R"({"3": {"delay_ms": -1}})", R"({"3": {"hang": 1}})", R"({"3": 5})"})
    EXPECT_THROW(behaviour_set::parse(bad), std::invalid_argument) << bad;
}

TEST(BehaviourSet, ParsesAQuota) {
  const auto set = behaviour_set::parse(R"({
    "1": {"quota": {"requests": 50, "window_s": 5, "announce": "draft"}},
    "2": {"quota": {"requests": 3, "window_s": 60}},
    "3": {"quota": {"requests": 3, "window_s": 60, "announce": "x-epoch"}}})");
  EXPECT_EQ(set.for_subscriber(1).quota, 50);
  EXPECT_EQ(set.for_subscriber(1).quota_window, std::chrono::seconds(5));
  EXPECT_EQ(set.for_subscriber(1).quota_announce, behaviour::announce::draft);
  EXPECT_EQ(set.for_subscriber(2).quota_announce, behaviour::announce::none);
  EXPECT_EQ(set.for_subscriber(3).quota_announce, behaviour::announce::x_epoch);
  for (const char* bad : {R"({"3": {"quota": 5}})", R"({"3": {"quota": {"requests": 5}}})",
                          R"({"3": {"quota": {"requests": 0, "window_s": 1}}})",
                          R"({"3": {"quota": {"requests": 5, "window_s": 0.5}}})",
                          R"({"3": {"quota": {"requests": 5, "window_s": 1, "announce": "y"}}})",
                          R"({"3": {"quota": {"requests": 5, "window_s": 1, "per": 2}}})"})
    EXPECT_THROW(behaviour_set::parse(bad), std::invalid_argument) << bad;
}

std::string header_of(const action& a, const std::string& name) {
  for (const auto& [field, value] : a.headers) {
    if (field == name) return value;
  }
  return "(none)";
}

TEST(Reply, TheWaitGrowsWithTheRequestsBeingAnswered) {
  reply answer;
  answer.delay = std::chrono::milliseconds(20);
  answer.delay_per_request = std::chrono::microseconds(150'000);
  EXPECT_EQ(answer.wait_while_answering(1), std::chrono::microseconds(170'000));
  EXPECT_EQ(answer.wait_while_answering(3), std::chrono::microseconds(470'000));
  EXPECT_EQ(reply{}.wait_while_answering(5), std::chrono::microseconds(0));
}

TEST(Responder, AQuotaRefusesBeyondItAndAnnouncesWhatIsLeft) {
  // A window of a day: the test cannot straddle its reset.
  responder draft(behaviour_set::parse(
      R"({"*": {"quota": {"requests": 2, "window_s": 86400, "announce": "draft"}}})"));
  const auto first = draft.decide(7, "1");
  EXPECT_EQ(first.status, 200u);
  EXPECT_EQ(header_of(first, "RateLimit-Policy"), "\"quota\";q=2;w=86400");
  EXPECT_EQ(header_of(first, "RateLimit").rfind("\"quota\";r=1;t=", 0), 0u);
  EXPECT_EQ(draft.decide(7, "2").status, 200u);
  const auto refused = draft.decide(7, "3");
  EXPECT_EQ(refused.status, 429u);
  EXPECT_FALSE(refused.retry_after.empty());
  EXPECT_EQ(header_of(refused, "RateLimit").rfind("\"quota\";r=0;t=", 0), 0u);
  EXPECT_EQ(draft.decide(8, "4").status, 200u) << "each subscriber has its own quota";

  responder x(behaviour_set::parse(
      R"({"*": {"quota": {"requests": 1, "window_s": 86400, "announce": "x-epoch"}}})"));
  const auto only = x.decide(7, "1");
  EXPECT_EQ(header_of(only, "X-RateLimit-Limit"), "1");
  EXPECT_EQ(header_of(only, "X-RateLimit-Remaining"), "0");
  EXPECT_EQ(std::stoll(header_of(only, "X-RateLimit-Reset")) % 86400, 0);
  EXPECT_EQ(x.decide(7, "2").status, 429u);

  responder silent(behaviour_set::parse(R"({"*": {"quota": {"requests": 1, "window_s": 86400}}})"));
  EXPECT_TRUE(silent.decide(7, "1").headers.empty());
  EXPECT_EQ(silent.decide(7, "2").status, 429u);
}

TEST(Responder, FailFirstCountsPerDeliveryId) {
  responder r(behaviour_set::parse(R"({"11": {"fail_first": 2, "status": 503}})"));
  EXPECT_EQ(r.decide(11, "a").status, 503u);
  EXPECT_EQ(r.decide(11, "b").status, 503u);
  EXPECT_EQ(r.decide(11, "a").status, 503u);
  EXPECT_EQ(r.decide(11, "a").status, 200u);
  EXPECT_EQ(r.decide(11, "a").status, 200u);
  EXPECT_EQ(r.decide(11, "b").status, 503u);
}

TEST(Responder, FailFirstWithoutStatusFailsWith500) {
  responder r(behaviour_set::parse(R"({"*": {"fail_first": 1}})"));
  EXPECT_EQ(r.decide(1, "a").status, 500u);
  EXPECT_EQ(r.decide(1, "a").status, 200u);
}

TEST(Responder, MixPicksOnlyConfiguredStatusesAndIsSeeded) {
  const auto json = R"({"5": {"mix": [[200, 0.5], [503, 0.5]]}})";
  responder first(behaviour_set::parse(json), 7);
  responder second(behaviour_set::parse(json), 7);
  std::multiset<unsigned> seen;
  for (int i = 0; i < 200; ++i) {
    const unsigned status = first.decide(5, "").status;
    EXPECT_EQ(status, second.decide(5, "").status);
    seen.insert(status);
  }
  EXPECT_EQ(seen.count(200) + seen.count(503), 200u);
  EXPECT_GT(seen.count(200), 0u);
  EXPECT_GT(seen.count(503), 0u);
}

TEST(Responder, ResetFirstCountsPerDeliveryIdThenAnswers) {
  responder r(behaviour_set::parse(R"({"8": {"reset_first": 2, "status": 202}})"));
  EXPECT_EQ(r.decide(8, "a").what, action::kind::reset);
  EXPECT_EQ(r.decide(8, "b").what, action::kind::reset);
  EXPECT_EQ(r.decide(8, "a").what, action::kind::reset);
  const auto answered = r.decide(8, "a");
  EXPECT_EQ(answered.what, action::kind::respond);
  EXPECT_EQ(answered.status, 202u);
  EXPECT_EQ(r.decide(8, "b").what, action::kind::reset);
  EXPECT_EQ(r.decide(8, "b").what, action::kind::respond);
}

TEST(Responder, CarriesTheBodyShapeAndTheLocation) {
  responder r(behaviour_set::parse(R"({"3": {"body_bytes": 100}, "4": {"announce_length": 9},
    "5": {"endless_chunked": true}, "6": {"status": 301, "location": "/x", "trickle_ms": 5}})"));
  EXPECT_EQ(r.decide(3, "").body, body_shape::sized);
  EXPECT_EQ(r.decide(3, "").body_length, 100u);
  EXPECT_EQ(r.decide(4, "").body, body_shape::announced);
  EXPECT_EQ(r.decide(4, "").body_length, 9u);
  EXPECT_EQ(r.decide(5, "").body, body_shape::endless_chunked);
  const auto moved = r.decide(6, "");
  EXPECT_EQ(moved.body, body_shape::normal);
  EXPECT_EQ(moved.status, 301u);
  EXPECT_EQ(moved.location, "/x");
  EXPECT_EQ(moved.trickle, std::chrono::milliseconds(5));
}

TEST(Responder, HangAndResetAreActions) {
  responder r(behaviour_set::parse(R"({"7": {"hang": true}, "8": {"reset": true}})"));
  EXPECT_EQ(r.decide(7, "").what, action::kind::hang);
  EXPECT_EQ(r.decide(8, "").what, action::kind::reset);
  EXPECT_EQ(r.decide(9, "").what, action::kind::respond);
}

}  // namespace
}  // namespace surge::sink
