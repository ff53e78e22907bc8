// The metrics listener (engine/observe/metrics_server) when the process is out of file
// descriptors: a client that connects then waits in the listen queue, and accepting again at
// once would fail the same way, spinning the drain's control thread, until a descriptor frees.
// A real listener and client on loopback, and this process's real file limit.
#include "engine/observe/metrics_server.hpp"
#include "tests/engine/descriptors_exhausted.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

namespace surge::engine {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;
using testing::descriptors_exhausted;

metrics_server::handlers fixed_answers() {
  return {.metrics = [] { return std::string("surge_up 1\n"); },
          .unhealthy_reason = [] { return std::string(); },
          .partners_json = [] { return std::string("[]"); }};
}

std::chrono::nanoseconds thread_cpu() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec);
}

TEST(MetricsServer, OutOfDescriptorsTheListenerWaitsAndServesTheClientOnceOneFrees) {
  asio::io_context io;
  metrics_server server(io, "127.0.0.1:0", fixed_answers());
  tcp::socket client(io);
  client.open(tcp::v4());
  // The reactor and a timer run once before: UBSan's check of their virtual calls, which needs
  // a pipe the first time, then finds them in its cache.
  asio::steady_timer warm_up(io, 1ms);
  warm_up.async_wait([](const boost::system::error_code&) {});
  io.run_for(20ms);

  descriptors_exhausted limit;
  ASSERT_TRUE(limit.exhausted());
  client.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), server.port()));
  asio::write(client, asio::buffer(std::string_view("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")));
  const auto cpu_before = thread_cpu();
  io.run_for(300ms);
  const auto spent = thread_cpu() - cpu_before;
  limit.restore();  // before any assertion: gtest's messages need descriptors too
  // Spinning on the failed accept would take most of the 300 ms.
  EXPECT_LT(spent, 60ms) << "the listener spun on EMFILE";

  io.run_for(300ms);
  char answer[64] = {};
  client.non_blocking(true);
  boost::system::error_code ec;
  const auto read = client.read_some(asio::buffer(answer, sizeof answer - 1), ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(std::string(answer, read).rfind("HTTP/1.1 200", 0), 0u) << answer;
}

std::string answer_to_get(tcp::socket& client, asio::io_context& io) {
  asio::write(client, asio::buffer(std::string_view("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")));
  io.run_for(100ms);
  char answer[64] = {};
  client.non_blocking(true);
  boost::system::error_code ec;
  const auto read = client.read_some(asio::buffer(answer, sizeof answer - 1), ec);
  return ec ? "error: " + ec.message() : std::string(answer, read);
}

TEST(MetricsServer, ClientsPastItsCapAreClosedAtOnceAndTheOthersStillServed) {
  // A scraper that opens connections and leaves them open must not take the descriptors the
  // drain keeps besides its partner connections.
  asio::io_context io;
  metrics_server server(io, "127.0.0.1:0", fixed_answers());
  const tcp::endpoint at(asio::ip::make_address("127.0.0.1"), server.port());
  std::vector<tcp::socket> held;
  for (int i = 0; i < 32; ++i) held.emplace_back(io).connect(at);
  io.run_for(100ms);
  tcp::socket past(io);
  past.connect(at);
  io.run_for(100ms);
  char byte = 0;
  boost::system::error_code ec;
  past.non_blocking(true);  // kept open, the read would block: would_block fails the test
  past.read_some(asio::buffer(&byte, 1), ec);
  EXPECT_EQ(ec, asio::error::eof) << "the 33rd client was kept open";
  EXPECT_EQ(answer_to_get(held.front(), io).rfind("HTTP/1.1 200", 0), 0u);
  // One of them leaves: a new client is served.
  held.back().close();
  io.run_for(100ms);
  tcp::socket next(io);
  next.connect(at);
  io.run_for(100ms);
  EXPECT_EQ(answer_to_get(next, io).rfind("HTTP/1.1 200", 0), 0u);
}

}  // namespace
}  // namespace surge::engine
