// `surge sink` as the command line drives it: flag checks, and a whole run ended by SIGTERM.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <future>
#include <thread>

#include <CLI/CLI.hpp>

#include "sink_test_support.hpp"
#include "tools/commands.hpp"

namespace surge::sink {
namespace {

using namespace testing;
using namespace std::chrono_literals;

class SinkCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    queue_ = dir_.file("queue.db");
    create_queue(queue_, default_subscribers());
  }

  // Parses like main() does and returns the chosen action.
  tools::command_action parse(std::vector<std::string> args) {
    app_.require_subcommand(1, 1);
    tools::add_sink_command(app_, action_);
    args.insert(args.begin(), "surge");
    std::vector<const char*> argv;
    for (const auto& arg : args) argv.push_back(arg.c_str());
    app_.parse(static_cast<int>(argv.size()), argv.data());
    return action_;
  }

  temp_dir dir_;
  std::string queue_;
  CLI::App app_;
  tools::command_action action_;
};

TEST_F(SinkCommand, BadListenIsAUsageError) {
  for (const char* listen :
       {"nonsense", "127.0.0.1:", "127.0.0.1:70000", "127.0.0.1:x", ":0", ":8080"}) {
    CLI::App app;
    tools::command_action action;
    tools::add_sink_command(app, action);
    const char* argv[] = {"surge", "sink", "--listen", listen, "--db", queue_.c_str()};
    app.parse(6, argv);
    ASSERT_TRUE(action);
    EXPECT_THROW(action(), tools::usage_error) << listen;
  }
}

TEST_F(SinkCommand, BadBehavioursAreAUsageError) {
  const auto path = dir_.file("behaviours.json");
  std::ofstream(path) << R"({"3": {"stauts": 500}})";
  auto action = parse({"sink", "--listen", "127.0.0.1:0", "--db", queue_, "--behaviours", path});
  EXPECT_THROW(action(), tools::usage_error);
}

TEST_F(SinkCommand, MissingQueueFileAndLoneTlsKeyAreRejectedByParsing) {
  EXPECT_THROW(parse({"sink", "--listen", "127.0.0.1:0", "--db", dir_.file("absent.db")}),
               CLI::ParseError);
  CLI::App app;
  tools::command_action action;
  tools::add_sink_command(app, action);
  const std::string key = queue_;  // any existing file: the pairing is what fails
  const char* argv[] = {"surge", "sink",         "--listen",  "127.0.0.1:0",
                        "--db",  queue_.c_str(), "--tls-key", key.c_str()};
  EXPECT_THROW(app.parse(8, argv), CLI::ParseError);
  CLI::App threads_app;
  tools::add_sink_command(threads_app, action);
  const char* threads_argv[] = {"surge", "sink",         "--listen",  "127.0.0.1:0",
                                "--db",  queue_.c_str(), "--threads", "0"};
  EXPECT_THROW(threads_app.parse(8, threads_argv), CLI::ParseError);
}

TEST_F(SinkCommand, RunsUntilSigtermAndLeavesACompleteRecord) {
  const auto port_file = dir_.file("port");
  const auto record = dir_.file("record.csv");
  const auto behaviours = dir_.file("behaviours.json");
  std::ofstream(behaviours) << R"({"3": {"status": 503, "retry_after": "1"}})";
  auto action = parse({"sink", "--listen", "127.0.0.1:0", "--db", queue_, "--record", record,
                       "--port-file", port_file, "--behaviours", behaviours, "--threads", "2"});
  auto exit_code = std::async(std::launch::async, action);

  std::uint16_t port = 0;
  for (int i = 0; i < 1000 && port == 0; ++i) {
    std::ifstream in(port_file);
    if (!(in >> port)) std::this_thread::sleep_for(10ms);
  }
  ASSERT_NE(port, 0);

  const auto rows = default_subscribers();
  const auto ok = send_once(port, signed_request({.subscriber_id = 1}, rows[0]));
  ASSERT_TRUE(ok.response) << ok.error.message();
  const auto limited = send_once(port, signed_request({.subscriber_id = 3}, rows[2]));
  ASSERT_TRUE(limited.response);
  EXPECT_EQ(limited.response->result_int(), 503u);

  // The sink installed its handler before writing the port file, so this cannot kill the test.
  std::raise(SIGTERM);
  ASSERT_EQ(exit_code.wait_for(30s), std::future_status::ready);
  EXPECT_EQ(exit_code.get(), tools::exit_ok);
  EXPECT_EQ(read_lines(record).size(), 2u);
}

}  // namespace
}  // namespace surge::sink
