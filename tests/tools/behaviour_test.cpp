#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "tools/sink/behaviour.hpp"

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

TEST(BehaviourSet, DefaultsToPlain200) {
  const auto set = behaviour_set::parse("{}");
  EXPECT_EQ(set.for_subscriber(1).status, 200u);
  EXPECT_FALSE(set.for_subscriber(1).hang);
}

TEST(BehaviourSet, RejectsMistakes) {
  for (const char* bad : {"[]", "{", R"({"x": {}})", R"({"3": {"stauts": 500}})",
                          R"({"3": {"status": 99}})", R"({"3": {"status": "500"}})",
                          R"({"3": {"mix": []}})", R"({"3": {"mix": [[200, 0]]}})",
                          R"({"3": {"delay_ms": -1}})", R"({"3": {"hang": 1}})", R"({"3": 5})"})
    EXPECT_THROW(behaviour_set::parse(bad), std::invalid_argument) << bad;
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

TEST(Responder, HangAndResetAreActions) {
  responder r(behaviour_set::parse(R"({"7": {"hang": true}, "8": {"reset": true}})"));
  EXPECT_EQ(r.decide(7, "").what, action::kind::hang);
  EXPECT_EQ(r.decide(8, "").what, action::kind::reset);
  EXPECT_EQ(r.decide(9, "").what, action::kind::respond);
}

}  // namespace
}  // namespace surge::sink
