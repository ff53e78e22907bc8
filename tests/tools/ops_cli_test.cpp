// The operator's kit through the real `surge` binary: --version, drain --config, prune, and the
// cron pattern (flock + timeout) as docs/operations.md gives it.
#include <fstream>
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/e2e.hpp"

namespace surge::testing {
namespace {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(OpsCli, VersionNamesTheReleaseAndTheCommit) {
  temp_dir dir;
  const auto result = run_surge(dir, {"--version"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_TRUE(std::regex_search(
      result.out, std::regex(R"(^surge \d+\.\d+\.\d+ \(commit ([0-9a-f]{7,}(-dirty)?|unknown)\))")))
      << result.out;
}

TEST(OpsCli, DrainTakesEveryFlagFromAConfigFileAndTheCommandLineWins) {
  temp_dir dir;
  test_queue queue(dir);
  const std::string config = dir.file("drain.toml");
  write_file(config, "# a drain's flags\ndb = \"" + queue.path() +
                         "\"\nuntil-drained = true\nprogress = \"off\"\nthreads = 1\n");
  auto result = run_surge(dir, {"drain", "--config", config});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(contains(result.out, "(drained)")) << "--db and --until-drained came from the file";

  // A value the drain refuses proves the file is read; the same flag on the command line wins.
  write_file(config, "db = \"" + queue.path() + "\"\nuntil-drained = true\nlease = 5\n");
  result = run_surge(dir, {"drain", "--config", config});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, "--lease")) << result.err;
  result = run_surge(dir, {"drain", "--config", config, "--lease", "60", "--progress", "off"});
  EXPECT_EQ(result.exit_code, 0) << result.err;

  write_file(config, "db = \"" + queue.path() + "\"\nuntil-drainde = true\n");
  result = run_surge(dir, {"drain", "--config", config});
  EXPECT_EQ(result.exit_code, 2) << "a misspelt key must not be ignored";
  EXPECT_TRUE(contains(result.err, "until-drainde")) << result.err;

  write_file(config, "db = \"" + queue.path() + "\"\nthreads = many\n");
  result = run_surge(dir, {"drain", "--config", config});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, "threads")) << result.err;

  write_file(config, "db = \"" + queue.path() + "\"\n[unclosed\n");
  result = run_surge(dir, {"drain", "--config", config});
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_FALSE(result.err.empty());

  result = run_surge(dir, {"drain", "--config", dir.file("absent.toml")});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(contains(result.err, "absent.toml")) << result.err;

  result = run_surge(dir, {"drain", "--help"});
  EXPECT_TRUE(contains(result.out, "--config")) << result.out;
  EXPECT_TRUE(contains(result.out, "command line win")) << result.out;
}

TEST(OpsCli, TheShippedExampleConfigIsValid) {
  temp_dir dir;
  test_queue queue(dir);
  // The shipped file names production paths and ports; the command line overrides those.
  const auto result = run_surge(dir, {"drain", "--config", SURGE_DIST_DIR "/drain.toml",
                                      "--db", queue.path(), "--metrics-listen", "127.0.0.1:0",
                                      "--until-drained"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(contains(result.out, "(drained)")) << result.out;
}

}  // namespace
}  // namespace surge::testing
