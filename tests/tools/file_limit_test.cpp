// How a drain fits its partner connections to the files it may open (tools/file_limit): the
// budget as a pure function of the limit, and the raise of the soft limit on this process.
#include "tools/file_limit.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

#include <sys/resource.h>

#include "tools/commands.hpp"

namespace surge::tools {
namespace {

constexpr int default_in_flight = engine::scheduler_config{}.max_in_flight;
constexpr int two_shards = 2;  // 240 + 2 x 8 = 256 descriptors kept

TEST(FileLimit, APlentifulLimitKeepsTheInFlightCeilingAndBoundsConnectionsByTheFiles) {
  const auto budget = budget_connections(1'048'576, two_shards, default_in_flight, false);
  EXPECT_EQ(budget.max_in_flight, default_in_flight);
  EXPECT_EQ(budget.max_connections, 1'048'576 - 256);
  EXPECT_TRUE(budget.lowered.empty());
}

TEST(FileLimit, TheDefaultInFlightCeilingIsLoweredToWhatTheFilesFitWithAWarning) {
  // 1,024: what a Debian shell's soft limit is when nothing raises it.
  const auto budget = budget_connections(1024, two_shards, default_in_flight, false);
  // 768 descriptors for connections, three quarters of them for requests in flight.
  EXPECT_EQ(budget.max_in_flight, 576);
  EXPECT_EQ(budget.max_connections, 768u);
  EXPECT_NE(budget.lowered.find("held to 576 instead of 4096"), std::string::npos)
      << budget.lowered;
  EXPECT_NE(budget.lowered.find("may open 1024 files"), std::string::npos) << budget.lowered;
}

TEST(FileLimit, AnInFlightCeilingTheOperatorGaveThatDoesNotFitIsAnError) {
  try {
    budget_connections(1024, two_shards, 4096, true);
    FAIL() << "no error";
  } catch (const usage_error& error) {
    const std::string text = error.what();
    EXPECT_NE(text.find("--max-in-flight 4096 does not fit"), std::string::npos) << text;
    EXPECT_NE(text.find("768 of them for partner connections"), std::string::npos) << text;
    EXPECT_NE(text.find("in flight may hold 576"), std::string::npos) << text;
  }
  EXPECT_EQ(budget_connections(1024, two_shards, 576, true).max_in_flight, 576);
  EXPECT_THROW(budget_connections(1024, two_shards, 577, true), usage_error);
}

TEST(FileLimit, ALimitThatLeavesLessThanARequestPerShardIsAnError) {
  // Two shards keep 256; three descriptors more give two requests in flight, one per shard.
  EXPECT_EQ(budget_connections(259, two_shards, 16, false).max_in_flight, 2);
  EXPECT_THROW(budget_connections(258, two_shards, 16, false), usage_error);
  EXPECT_THROW(budget_connections(256, two_shards, 16, false), usage_error);
}

TEST(FileLimit, EachShardKeepsDescriptorsOfItsOwn) {
  const auto one = budget_connections(1024, 1, default_in_flight, false);
  const auto many = budget_connections(1024, 64, default_in_flight, false);
  EXPECT_EQ(one.max_connections - many.max_connections, 63 * descriptors_per_shard);
}

TEST(FileLimit, AnUnlimitedLimitDoesNotOverflow) {
  const auto budget =
      budget_connections(std::numeric_limits<std::uint64_t>::max(), two_shards, 4096, true);
  EXPECT_EQ(budget.max_in_flight, 4096);
  EXPECT_GT(budget.max_connections, 1'000'000'000u);
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
  // A Debian shell's 1,024, or less where the hard limit is lower.
  const rlimit low{std::min<rlim_t>(1024, hard / 2), hard};
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  engine::drain_config config;
  const auto lowered = fit_connections_to_file_limit(config, two_shards, false);
  EXPECT_EQ(current_limit().rlim_cur, hard);
  EXPECT_EQ(config.http.max_connections, hard - 256);
  if ((hard - 256) * 3 / 4 >= static_cast<rlim_t>(default_in_flight)) {
    EXPECT_EQ(config.scheduler.max_in_flight, default_in_flight);
    EXPECT_TRUE(lowered.empty()) << lowered;
  }
}

// What the drain's start does under a hard limit of 1,024: 0 when all is as it should be, else
// the number of the first check that failed.
int fit_under_a_hard_limit_of_1024() {
  const rlimit low{1024, 1024};
  if (setrlimit(RLIMIT_NOFILE, &low) != 0) return 10;
  engine::drain_config config;
  const auto lowered = fit_connections_to_file_limit(config, two_shards, false);
  if (config.scheduler.max_in_flight != 576) return 11;
  if (config.http.max_connections != 768u) return 12;
  if (lowered.find("held to 576") == std::string::npos) return 13;
  engine::drain_config given;
  try {
    fit_connections_to_file_limit(given, two_shards, true);
    return 14;
  } catch (const usage_error&) {
  }
  return 0;
}

// In a child process: an unprivileged process cannot raise its hard limit again, and the
// tests after this one need theirs.
TEST(FileLimit, UnderALowHardLimitTheDrainHoldsItsDefaultCeilingBelowIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::_Exit(fit_under_a_hard_limit_of_1024()), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace surge::tools
