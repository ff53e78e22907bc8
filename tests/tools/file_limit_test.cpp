// How a drain fits its partner connections to the files it may open (tools/file_limit): the
// budget as a pure function of the limit, and the raise of the soft limit on this process.
#include "tools/file_limit.hpp"

#include <gtest/gtest.h>

#include <string>

#include <sys/resource.h>

#include "tools/commands.hpp"

namespace surge::tools {
namespace {

constexpr int default_in_flight = engine::scheduler_config{}.max_in_flight;

TEST(FileLimit, APlentifulLimitKeepsTheInFlightCeilingAndBoundsConnectionsByTheFiles) {
  const auto budget = budget_connections(1'048'576, default_in_flight, false);
  EXPECT_EQ(budget.max_in_flight, default_in_flight);
  EXPECT_EQ(budget.max_connections, 1'048'576 - descriptors_besides_connections);
  EXPECT_TRUE(budget.lowered.empty());
}

TEST(FileLimit, TheDefaultInFlightCeilingIsLoweredToWhatTheFilesFitWithAWarning) {
  // 1,024: what a Debian shell's soft limit is when nothing raises it.
  const auto budget = budget_connections(1024, default_in_flight, false);
  // 768 descriptors for connections, three quarters of them for requests in flight.
  EXPECT_EQ(budget.max_in_flight, 576);
  EXPECT_EQ(budget.max_connections, 1024 - descriptors_besides_connections);
  EXPECT_NE(budget.lowered.find("held to 576 instead of 4096"), std::string::npos)
      << budget.lowered;
  EXPECT_NE(budget.lowered.find("may open 1024 files"), std::string::npos) << budget.lowered;
}

TEST(FileLimit, AnInFlightCeilingTheOperatorGaveThatDoesNotFitIsAnError) {
  try {
    budget_connections(1024, 4096, true);
    FAIL() << "no error";
  } catch (const usage_error& error) {
    const std::string text = error.what();
    EXPECT_NE(text.find("--max-in-flight 4096 does not fit"), std::string::npos) << text;
    EXPECT_NE(text.find("768 of them for partner connections"), std::string::npos) << text;
    EXPECT_NE(text.find("in flight may hold 576"), std::string::npos) << text;
  }
  EXPECT_EQ(budget_connections(1024, 576, true).max_in_flight, 576);
  EXPECT_THROW(budget_connections(1024, 577, true), usage_error);
}

TEST(FileLimit, ALimitThatLeavesNothingForConnectionsIsAnError) {
  EXPECT_THROW(budget_connections(descriptors_besides_connections, 16, false), usage_error);
  EXPECT_EQ(budget_connections(descriptors_besides_connections + 1, 16, false).max_in_flight, 1);
}

// Restores this process's limit when the test ends, whatever it asserted.
class file_limit_kept {
 public:
  file_limit_kept() { getrlimit(RLIMIT_NOFILE, &kept_); }
  ~file_limit_kept() { setrlimit(RLIMIT_NOFILE, &kept_); }
  const rlimit& kept() const { return kept_; }

 private:
  rlimit kept_{};
};

rlimit current_limit() {
  rlimit now{};
  getrlimit(RLIMIT_NOFILE, &now);
  return now;
}

TEST(FileLimit, TheDrainRaisesItsSoftLimitToTheHardOneAndBudgetsOnIt) {
  file_limit_kept kept;
  const auto hard = kept.kept().rlim_max;
  ASSERT_GT(hard, 1024u) << "this machine's hard limit leaves nothing to raise";
  const rlimit low{1024, hard};
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  engine::drain_config config;
  const auto lowered = fit_connections_to_file_limit(config, false);
  EXPECT_EQ(current_limit().rlim_cur, hard);
  EXPECT_EQ(config.http.max_connections, hard - descriptors_besides_connections);
  if ((hard - descriptors_besides_connections) * 3 / 4 >= static_cast<rlim_t>(default_in_flight)) {
    EXPECT_EQ(config.scheduler.max_in_flight, default_in_flight);
    EXPECT_TRUE(lowered.empty()) << lowered;
  }
}

TEST(FileLimit, UnderALowHardLimitTheDrainHoldsItsDefaultCeilingBelowIt) {
  file_limit_kept kept;
  // Lowering the hard limit is for good in this process: the test runs in its own (ctest).
  const rlimit low{1024, 1024};
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  engine::drain_config config;
  const auto lowered = fit_connections_to_file_limit(config, false);
  EXPECT_EQ(config.scheduler.max_in_flight, 576);
  EXPECT_EQ(config.http.max_connections, 768u);
  EXPECT_NE(lowered.find("held to 576"), std::string::npos) << lowered;
  engine::drain_config given;
  EXPECT_THROW(fit_connections_to_file_limit(given, true), usage_error);
}

}  // namespace
}  // namespace surge::tools
