// The HTTP client when this process is out of file descriptors: a connect first closes the
// connection idle longest to make room, and when none is idle fails as no fault of the partner
// (http_result::out_of_descriptors, which the shard settles with no attempt counted and nothing
// charged to the partner's circuit). A real client on loopback, and this process's real limit.
#include "engine/net/http_client.hpp"
#include "tests/engine/descriptors_exhausted.hpp"
#include "tests/engine/net/closing_peer.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/core/error.hpp>

namespace surge::engine {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;
using test_peers::closing_peer;
using test_peers::loopback_target;
using test_peers::request;
using testing::descriptors_exhausted;

TEST(HttpOutOfDescriptors, AConnectClosesAnIdleConnectionForRoomOrFailsAsNoFaultOfThePartner) {
  // The first origin answers; the second's listener never accepts, so its connects complete
  // in the kernel's queue and their requests wait for the attempt deadline.
  closing_peer answering(test_peers::scripts{{.answered = 1'000'000}});
  asio::io_context io;
  tcp::acceptor silent(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  http_client_config config;
  config.allow_private_targets = true;
  config.attempt_timeout = 300ms;
  http_client client(io.get_executor(), nullptr, config);
  auto send = [&](const proto::target& target) {
    http_result result;
    asio::co_spawn(
        io, [&]() -> asio::awaitable<void> { result = co_await client.send(target, request); },
        asio::detached);
    io.restart();
    io.run();
    return result;
  };
  // The client's paths run once with descriptors to spare (see descriptors_exhausted.hpp).
  ASSERT_EQ(send(loopback_target(answering.port())).status, 204);  // its connection stays idle
  // So do the peer's: a connection of its ends, and its thread with it.
  {
    tcp::socket once(io);
    once.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), answering.port()));
  }
  for (int waited = 0; answering.closed_by_client() < 1 && waited < 500; ++waited) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(answering.closed_by_client(), 1);
  // And the errors of both ends.
  for (const auto& ec : {boost::system::error_code(EMFILE, boost::system::system_category()),
                         boost::system::error_code(boost::beast::error::timeout),
                         boost::system::error_code(asio::error::eof),
                         boost::system::error_code(asio::error::operation_aborted)}) {
    ASSERT_FALSE(ec.message().empty());
  }

  http_result with_an_idle_one;
  {
    descriptors_exhausted limit;
    ASSERT_TRUE(limit.exhausted());
    with_an_idle_one = send(loopback_target(silent.local_endpoint().port()));
  }
  for (int waited = 0; answering.closed_by_client() < 2 && waited < 500; ++waited) {
    std::this_thread::sleep_for(10ms);  // the peer's end of the connection closed for room
  }
  http_result with_none_idle;
  {
    descriptors_exhausted limit;
    ASSERT_TRUE(limit.exhausted());
    with_none_idle = send(loopback_target(silent.local_endpoint().port()));
  }

  // The answering origin's idle connection made room: the connect went through, and the
  // attempt ended at its deadline waiting for the silent listener.
  EXPECT_FALSE(with_an_idle_one.out_of_descriptors) << with_an_idle_one.detail;
  EXPECT_EQ(with_an_idle_one.error, proto::transport_error::timeout) << with_an_idle_one.detail;
  EXPECT_EQ(answering.closed_by_client(), 2);
  // Nothing idle left to close: no fault of the partner's.
  EXPECT_TRUE(with_none_idle.out_of_descriptors) << with_none_idle.detail;
  EXPECT_EQ(with_none_idle.error, proto::transport_error::connect);
  EXPECT_NE(with_none_idle.detail.find("no file descriptor free to connect to 127.0.0.1"),
            std::string::npos)
      << with_none_idle.detail;
}

}  // namespace
}  // namespace surge::engine
