// The operator's kit through the real `surge` binary: --version, drain --config, prune, and the
// cron pattern (flock + timeout) as docs/operations.md gives it.
#include <sys/resource.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include "proto/clock.hpp"
#include "storage/sqlite/database.hpp"
#include "tests/support/e2e.hpp"
#include "tools/process.hpp"

namespace surge::testing {
namespace {

void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(OpsCli, VersionNamesTheReleaseTheCommitAndTheAllocator) {
  temp_dir dir;
  const auto result = run_surge(dir, {"--version"});
  EXPECT_EQ(result.exit_code, 0);
  // jemalloc where the build links it (SURGE_JEMALLOC: not under the sanitizers), and the
  // version the program really runs on, read from jemalloc itself. Another build's binary
  // (SURGE_TEST_BINARY) may run on either.
  const std::string jemalloc = R"(jemalloc \d+\.\d+\.\d+\S*)";
#ifdef SURGE_JEMALLOC
  std::string allocator = jemalloc;
#else
  std::string allocator = "glibc malloc";
#endif
  if (const char* other = std::getenv("SURGE_TEST_BINARY"); other != nullptr && *other != '\0') {
    allocator = "(" + jemalloc + "|glibc malloc)";
  }
  EXPECT_TRUE(std::regex_search(
      result.out, std::regex(R"(^surge \d+\.\d+\.\d+ \(commit ([0-9a-f]{7,}(-dirty)?|unknown), )" +
                             allocator + R"(\))")))
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

// --config names what an operator can get wrong: a device, a FIFO or a directory instead of a
// file, a huge file, a key set twice, a BOM from an editor, '#' inside a quoted value, a NUL
// byte. Each is a clear error (exit 2) with a short quote, or read as meant; none hangs or eats
// memory.
TEST(OpsCli, AConfigFileIsBoundedAndItsMistakesAreNamedPrecisely) {
  temp_dir dir;
  test_queue queue(dir);
  const std::string zero = dir.file("zero.toml");
  std::filesystem::create_symlink("/dev/zero", zero);
  const std::string fifo = dir.file("fifo.toml");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const auto& [path, why] : std::vector<std::pair<std::string, std::string>>{
           {zero, "a character device"}, {fifo, "a FIFO"}, {dir.path().string(), "a directory"}}) {
    for (const std::string command : {"drain", "prune"}) {
      const auto result = run_surge(dir, {command, "--config", path}, std::chrono::seconds(20));
      EXPECT_EQ(result.exit_code, 2) << command << " " << path << ": " << result.err;
      EXPECT_TRUE(contains(result.err, "not a regular file (" + why + ")")) << result.err;
    }
  }
  const std::string huge = dir.file("huge.toml");
  write_file(huge, "db = \"" + queue.path() + "\"\n# " + std::string(10 * 1024 * 1024, 'x') + "\n");
  auto result = run_surge(dir, {"drain", "--config", huge});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_TRUE(contains(result.err, "at most 65536")) << result.err;
  EXPECT_LT(result.err.size(), 1000u) << "the message quotes no more than a line's excerpt";

  const std::string config = dir.file("drain.toml");
  write_file(config, "db = \"" + queue.path() + "\"\nlease = 60\nthreads = 1\nlease = 90\n");
  result = run_surge(dir, {"drain", "--config", config});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_TRUE(contains(result.err, ":4: 'lease' is set again (first on line 2)")) << result.err;

  write_file(config,
             "\xEF\xBB\xBF"
             "db = \"" +
                 queue.path() + "\"\nuntil-drained = true\n");
  result = run_surge(dir, {"drain", "--config", config, "--progress", "off"});
  EXPECT_EQ(result.exit_code, 0) << "a BOM from an editor is not part of the first key: "
                                 << result.err;

  write_file(config, "db = \"" + queue.path() + "\"\nsubscribers = \"1#2\"  # a comment\n");
  result = run_surge(dir, {"drain", "--config", config, "--until-drained"});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_TRUE(contains(result.err, "1#2")) << "the value kept its '#': " << result.err;

  write_file(config,
             "db = \"" + queue.path() + "\"\nsubscribers = \"1" + std::string(1, '\0') + "2\"\n");
  result = run_surge(dir, {"drain", "--config", config, "--until-drained"});
  EXPECT_EQ(result.exit_code, 2) << "a NUL must not cut the value to \"1\": " << result.err;
  EXPECT_TRUE(contains(result.err, ":2: a control byte (0x00) at column 17")) << result.err;

  write_file(config, "db = \"" + queue.path() + "\"\nthreads = 1 2\n");
  result = run_surge(dir, {"drain", "--config", config});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_TRUE(contains(result.err, ":2: text after the value")) << result.err;
}

TEST(OpsCli, TheShippedExampleConfigIsValid) {
  temp_dir dir;
  test_queue queue(dir);
  // The shipped file names production paths and ports; the command line overrides those.
  const auto result =
      run_surge(dir, {"drain", "--config", SURGE_DIST_DIR "/drain.toml", "--db", queue.path(),
                      "--metrics-listen", "127.0.0.1:0", "--until-drained"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(contains(result.out, "(drained)")) << result.out;
}

// The cron line of docs/operations.md, with short times: flock keeps a second run from
// starting while one drains; the drain stops itself at --duration, well before timeout's
// backstop, and exits 0 with its summary.
TEST(OpsCli, CronPatternRunsOneDrainAtATime) {
  const auto flock = tools::find_program("flock");
  const auto timeout = tools::find_program("timeout");
  if (!flock || !timeout) GTEST_SKIP() << "flock (util-linux) or timeout (coreutils) missing";
  temp_dir dir;
  test_queue queue(dir);
  const std::string config = dir.file("queue.toml");
  write_file(config, "db = \"" + queue.path() + "\"\nprogress = \"off\"\n");
  const auto cron_line = [&](const std::string& tag) {
    return tools::child_process(*flock,
                                {"-n", dir.file("queue.lock"), *timeout, "-k", "30", "60",
                                 surge_binary(), "drain", "--config", config, "--duration", "2"},
                                dir.file(tag + ".out"), dir.file(tag + ".err"));
  };
  auto first = cron_line("first");
  ASSERT_TRUE(tools::wait_for_file(dir.file("first.err"), std::chrono::seconds(10)))
      << "the first drain did not start";
  auto second = cron_line("second");
  EXPECT_EQ(second.wait(std::chrono::seconds(2)).value_or(-1), 1)
      << "flock -n exits 1 at once while the lock is held";
  std::ifstream second_out(dir.file("second.out"));
  EXPECT_EQ(second_out.peek(), std::ifstream::traits_type::eof()) << "no second drain ran";
  EXPECT_EQ(first.wait(std::chrono::seconds(30)).value_or(-1), 0);
  std::stringstream first_out;
  first_out << std::ifstream(dir.file("first.out")).rdbuf();
  EXPECT_TRUE(contains(first_out.str(), "summary: ")) << first_out.str();

  auto third = cron_line("third");
  EXPECT_EQ(third.wait(std::chrono::seconds(30)).value_or(-1), 0) << "the lock was released";
}

// systemd-analyze verify reads the shipped units as systemd would: an unknown or misplaced key
// is only a warning there, so its output must be empty too.
TEST(OpsCli, SystemdUnitsVerifyCleanly) {
  const auto analyze = tools::find_program("systemd-analyze");
  if (!analyze) GTEST_SKIP() << "systemd-analyze not found: install the Debian package systemd";
  temp_dir dir;
  // Not on a terminal, systemd tools log to the journal unless told otherwise.
  std::vector<std::string> args{"SYSTEMD_LOG_TARGET=console", *analyze, "verify"};
  for (const std::string unit :
       {"surge-drain@.service", "surge-prune@.service", "surge-prune@.timer"}) {
    std::stringstream text;
    text << std::ifstream(SURGE_DIST_DIR "/" + unit).rdbuf();
    // The units name the installed binary; verify checks that ExecStart exists.
    const auto installed = std::regex("/usr/bin/surge");
    const std::string instance = dir.file(std::regex_replace(unit, std::regex("@"), "@test"));
    write_file(instance, std::regex_replace(text.str(), installed, surge_binary()));
    args.push_back(instance);
  }
  const auto env = tools::find_program("env");
  ASSERT_TRUE(env);
  tools::child_process verify(*env, args, dir.file("verify.out"), dir.file("verify.err"));
  EXPECT_EQ(verify.wait(std::chrono::seconds(60)).value_or(-1), 0);
  // Streaming an empty file's rdbuf() sets failbit, so each file is read on its own.
  for (const char* name : {"verify.out", "verify.err"}) {
    std::stringstream text;
    text << std::ifstream(dir.file(name)).rdbuf();
    EXPECT_EQ(text.str(), "") << "systemd-analyze verify complained";
  }
}

TEST(OpsCli, PruneDeletesOldFinishedRowsOnly) {
  temp_dir dir;
  test_queue queue(dir);
  const auto sub = queue.add_subscriber("http://127.0.0.1:9/hook", 5, 10);
  const auto rows = queue.add_rows(sub, 6);
  const double two_hours_ago = proto::unix_now() - 7200;
  const auto set = [&](std::int64_t id, const std::string& assignments) {
    queue.db().exec("UPDATE webhook_delivery SET " + assignments +
                    " WHERE id = " + std::to_string(id));
  };
  set(rows[0], "status = 'done', delivered_at = " + std::to_string(two_hours_ago));
  set(rows[1], "status = 'done', delivered_at = " + std::to_string(two_hours_ago));
  set(rows[2], "status = 'done', delivered_at = " + std::to_string(proto::unix_now()));
  set(rows[3], "status = 'dead', created_at = " + std::to_string(two_hours_ago));
  set(rows[4], "status = 'retry', created_at = " + std::to_string(two_hours_ago));

  auto result = run_surge(dir, {"prune", "--db", queue.path(), "--older-than", "1h", "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto out = boost::json::parse(result.out).as_object();
  EXPECT_EQ(out.at("deliveries").as_int64(), 2);
  auto counts = queue.count_by_status();
  EXPECT_EQ(counts["done"], 1);
  EXPECT_EQ(counts["dead"], 1);
  EXPECT_EQ(counts["retry"], 1);
  EXPECT_EQ(counts["pending"], 1);

  result = run_surge(dir, {"prune", "--db", queue.path(), "--older-than", "90m", "--dead"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(contains(result.out, "pruned: deliveries=1 ")) << result.out;
  EXPECT_EQ(queue.count_by_status()["dead"], 0);

  for (const char* bad : {"5x", "-1h", "0", "h"}) {
    result = run_surge(dir, {"prune", "--db", queue.path(), "--older-than", bad});
    EXPECT_EQ(result.exit_code, 2) << bad;
    EXPECT_TRUE(contains(result.err, "--older-than")) << result.err;
  }
}

// A value the flag refuses, read from a --config file, is named with the file and its line, as
// the file's other mistakes are; a duration in the file takes a unit like the flag.
TEST(OpsCli, ABadValueInAConfigFileNamesTheFileAndLine) {
  temp_dir dir;
  test_queue queue(dir);
  const std::string config = dir.file("drain.toml");
  for (const auto& [line, key] :
       std::vector<std::pair<std::string, std::string>>{{"lease = \"2x\"", "lease"},
                                                        {"threads = many", "threads"},
                                                        {"grace = -1", "grace"},
                                                        {"progress = \"sometimes\"", "progress"},
                                                        {"subscribers = \"4-1\"", "subscribers"},
                                                        {"subscriber = \"\"", "subscriber"}}) {
    write_file(config, "# a drain's flags\ndb = \"" + queue.path() + "\"\n" + line + "\n");
    const auto result = run_surge(dir, {"drain", "--config", config, "--until-drained"});
    EXPECT_EQ(result.exit_code, 2) << line << ": " << result.err;
    EXPECT_TRUE(contains(result.err, config + ":3: bad value for '" + key + "'"))
        << line << ": " << result.err;
  }
  write_file(config, "db = \"" + queue.path() + "\"\nlease = \"2m\"\nidle-poll-min = \"5ms\"\n");
  const auto result =
      run_surge(dir, {"drain", "--config", config, "--until-drained", "--progress", "off"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
}

// prune reports the database file's size, not the file plus its write-ahead log (which grows
// while it deletes), so a file that did not change size is shown as such.
TEST(OpsCli, PruneReportsTheSizeOfTheDatabaseFile) {
  temp_dir dir;
  test_queue queue(dir);
  const auto sub = queue.add_subscriber("http://127.0.0.1:9/hook", 5, 10);
  const auto rows = queue.add_rows(sub, 2000, std::string(200, 'x'));
  queue.db().exec("UPDATE webhook_delivery SET status = 'done', delivered_at = " +
                  std::to_string(proto::unix_now() - 7200));
  queue.db().exec("PRAGMA wal_checkpoint(TRUNCATE)");
  const auto before = std::filesystem::file_size(queue.path());

  auto result = run_surge(dir, {"prune", "--db", queue.path(), "--older-than", "1h", "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto out = boost::json::parse(result.out).as_object();
  EXPECT_EQ(out.at("deliveries").as_int64(), static_cast<std::int64_t>(rows.size()));
  EXPECT_EQ(out.at("file_bytes_before").to_number<std::uint64_t>(), before);
  const auto after = std::filesystem::file_size(queue.path());
  EXPECT_EQ(after, before) << "without incremental vacuum the file keeps its size";
  EXPECT_EQ(out.at("file_bytes_after").to_number<std::uint64_t>(), after);
  EXPECT_GT(out.at("wal_bytes").to_number<std::uint64_t>(), 0u) << "the log is reported apart";

  queue.add_rows(sub, 10);
  result = run_surge(dir, {"prune", "--db", queue.path(), "--older-than", "1h"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto size = std::to_string(std::filesystem::file_size(queue.path()));
  EXPECT_TRUE(contains(result.out, "file_bytes=" + size + "->" + size + " ")) << result.out;
}

}  // namespace
}  // namespace surge::testing

namespace surge::testing {
namespace {

// The soft file limit of a running process, from /proc; 0 once it is gone.
unsigned long soft_file_limit(pid_t pid) {
  std::ifstream limits("/proc/" + std::to_string(pid) + "/limits");
  std::string line;
  while (std::getline(limits, line)) {
    if (line.rfind("Max open files", 0) == 0) return std::stoul(line.substr(26));
  }
  return 0;
}

// `surge COMMAND ARGS...` started by a shell that set the file limit first, as a login shell or
// a unit without LimitNOFILE= leaves it.
tools::child_process surge_under(const std::string& ulimit, const temp_dir& dir,
                                 const std::string& command, std::vector<std::string> args) {
  std::vector<std::string> shell_args{
      "-c", "ulimit " + ulimit + " && exec \"$0\" " + command + " \"$@\"", surge_binary()};
  shell_args.insert(shell_args.end(), args.begin(), args.end());
  return tools::child_process("/bin/sh", shell_args, dir.file("out"), dir.file("err"));
}
tools::child_process drain_under(const std::string& ulimit, const temp_dir& dir,
                                 std::vector<std::string> args) {
  return surge_under(ulimit, dir, "drain", std::move(args));
}

// The soft limit of `pid` once the shell has exec'd surge and surge has raised it above 1,024,
// or what it was after 10 s. Before the exec the shell's own limit shows, which says nothing.
unsigned long raised_file_limit(pid_t pid) {
  const auto surge = std::filesystem::canonical(surge_binary());
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  unsigned long soft = 0;
  while (std::chrono::steady_clock::now() < until) {
    std::error_code ec;
    const bool exec_done =
        std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec) == surge;
    soft = exec_done ? soft_file_limit(pid) : 0;
    if (soft > 1024) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return soft;
}

unsigned long our_hard_file_limit() {
  rlimit ours{};
  getrlimit(RLIMIT_NOFILE, &ours);
  return ours.rlim_max;
}

TEST(OpsCli, DrainRaisesItsSoftFileLimitToTheHardOne) {
  temp_dir dir;
  test_queue queue(dir);
  // The shell's exec keeps the process id; the limit is raised once the drain starts.
  auto drain = drain_under("-Sn 1024", dir, {"--db", queue.path(), "--duration", "2"});
  EXPECT_EQ(raised_file_limit(drain.pid()), our_hard_file_limit()) << read_file(dir.file("err"));
  EXPECT_EQ(drain.wait(std::chrono::seconds(20)), 0) << read_file(dir.file("err"));
}

TEST(OpsCli, SinkRaisesItsSoftFileLimitToTheHardOne) {
  // A drain's thousands of connections arrive at the sink too.
  temp_dir dir;
  test_queue queue(dir);
  auto sink =
      surge_under("-Sn 1024", dir, "sink", {"--listen", "127.0.0.1:0", "--db", queue.path()});
  EXPECT_EQ(raised_file_limit(sink.pid()), our_hard_file_limit()) << read_file(dir.file("err"));
  // Its signals are caught before the limit is raised.
  sink.signal(SIGTERM);
  EXPECT_EQ(sink.wait(std::chrono::seconds(20)), 0) << read_file(dir.file("err"));
}

TEST(OpsCli, UnderALowHardFileLimitTheDrainHoldsItsDefaultInFlightAndRefusesAnExplicitOne) {
  temp_dir dir;
  test_queue queue(dir);
  // Two shards, as the figures below assume, whatever this machine's cores.
  auto fitted =
      drain_under("-n 1024", dir, {"--db", queue.path(), "--until-drained", "--threads", "2"});
  EXPECT_EQ(fitted.wait(std::chrono::seconds(30)), 0) << read_file(dir.file("err"));
  const auto warned = read_file(dir.file("err"));
  EXPECT_TRUE(contains(warned, "requests in flight held to 576 instead of 4096")) << warned;
  auto refused = drain_under(
      "-n 1024", dir,
      {"--db", queue.path(), "--until-drained", "--threads", "2", "--max-in-flight", "4096"});
  EXPECT_EQ(refused.wait(std::chrono::seconds(30)), 2);
  const auto error = read_file(dir.file("err"));
  EXPECT_TRUE(contains(error, "--max-in-flight 4096 does not fit")) << error;
}

}  // namespace
}  // namespace surge::testing
