// What comes off a real socket, through the real CLI against hostile loopback servers: a response
// nobody asked for, and TLS housekeeping that is not one; and `emit` refusing an event type that
// would inject. Interim 1xx responses are the response reader's rule
// (tests/engine/net/response_reader_test.cpp); a queued event type that would inject is
// dead-lettered unsent by the shard core (tests/engine/shard/core_partner_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/support/e2e.hpp"
#include "tests/support/test_pki.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;
constexpr auto npos = std::string::npos;

struct seen_request {
  std::string target;
  std::int64_t delivery_id = 0;
  std::size_t connection = 0;
};

// What the server writes for one request: pieces written one after another, each flushed,
// with a pause before it.
struct piece {
  std::chrono::milliseconds pause{0};
  std::string bytes;
};
using responder = std::function<std::vector<piece>(const seen_request&)>;

// A raw HTTP/1.1 server on a loopback socket: one thread per connection, requests read with
// their Content-Length bodies (pipelined ones too), answers written as the responder says.
class raw_server {
 public:
  explicit raw_server(responder respond) : respond_(std::move(respond)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address);
    ::listen(listener_, 64);
    socklen_t length = sizeof address;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~raw_server() {
    stop_ = true;
    acceptor_.join();
    for (auto& worker : workers_) worker.join();
    ::close(listener_);
  }
  raw_server(const raw_server&) = delete;
  raw_server& operator=(const raw_server&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/hook"; }
  std::vector<seen_request> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  void accept_loop() {
    std::size_t next = 0;
    while (!stop_) {
      pollfd wait{listener_, POLLIN, 0};
      if (::poll(&wait, 1, 50) != 1) continue;
      const int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) continue;
      workers_.emplace_back([this, fd, id = next++] { serve(fd, id); });
    }
  }

  // Reads until `buffer` holds `size` bytes; false when the peer closed or the server stops.
  bool fill(int fd, std::string& buffer, std::size_t size) {
    char chunk[4096];
    while (buffer.size() < size || size == 0) {
      pollfd wait{fd, POLLIN, 0};
      if (stop_) return false;
      if (::poll(&wait, 1, 50) != 1) continue;
      const auto n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n <= 0) return false;
      buffer.append(chunk, static_cast<std::size_t>(n));
      if (size == 0) return true;
    }
    return true;
  }

  void serve(int fd, std::size_t connection) {
    std::string buffer;
    for (;;) {
      std::size_t head_end;
      while ((head_end = buffer.find("\r\n\r\n")) == npos) {
        if (!fill(fd, buffer, 0)) return close_fd(fd);
      }
      const std::string head = buffer.substr(0, head_end + 2);
      seen_request request;
      request.connection = connection;
      const auto space = head.find(' ');
      request.target = head.substr(space + 1, head.find(' ', space + 1) - space - 1);
      std::size_t body = 0;
      std::string lower = head;
      std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
      if (const auto at = lower.find("\r\ncontent-length:"); at != npos) {
        body = std::stoul(head.substr(at + 17));
      }
      if (const auto at = lower.find("\r\nx-vvv-delivery-id:"); at != npos) {
        request.delivery_id = std::stoll(head.substr(at + 20));
      }
      if (!fill(fd, buffer, head_end + 4 + body)) return close_fd(fd);
      buffer.erase(0, head_end + 4 + body);
      {
        std::lock_guard lock(mutex_);
        requests_.push_back(request);
      }
      for (const auto& step : respond_(request)) {
        if (step.pause.count() > 0) std::this_thread::sleep_for(step.pause);
        if (::send(fd, step.bytes.data(), step.bytes.size(), MSG_NOSIGNAL) < 0) {
          return close_fd(fd);
        }
      }
    }
  }
  static void close_fd(int fd) { ::close(fd); }

  responder respond_;
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::vector<std::thread> workers_;  // touched only by the acceptor until it is joined
  std::mutex mutex_;
  std::vector<seen_request> requests_;
};

std::string response(int status, const std::string& extra_headers = {}) {
  const std::string body = status == 200 ? "ok" : "refused";
  return "HTTP/1.1 " + std::to_string(status) + " X\r\n" + extra_headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::vector<std::string> drain_args(const test_queue& queue, std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"drain",
                                "--db",
                                queue.path(),
                                "--until-drained",
                                "--allow-private-targets",
                                "--progress-interval",
                                "0",
                                "--connect-timeout",
                                "2",
                                "--attempt-timeout",
                                "2",
                                "--max-attempts",
                                "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

void set_max_in_flight(test_queue& queue, std::int64_t subscriber, int cap) {
  queue.db().exec("UPDATE webhook_subscriber SET max_in_flight = " + std::to_string(cap) +
                  " WHERE id = " + std::to_string(subscriber));
}

// After each answer the server sends a second, unsolicited 200 a little later, while the
// connection sits idle. The next request must not take it for its own answer.
TEST(DrainWire, AResponseArrivingWhileIdleIsNeverTakenAsTheNextAnswer) {
  temp_dir dir;
  test_queue queue(dir);
  raw_server server([](const seen_request&) {
    return std::vector<piece>{{0ms, response(500)}, {100ms, response(200)}};
  });
  // Two requests a second, one at a time: each waits on the idle connection long after the
  // stray answer has arrived there.
  const auto id = queue.add_subscriber("http://placeholder/", 2, 1);
  queue.set_url(id, server.url());
  set_max_in_flight(queue, id, 1);
  const auto rows = queue.add_rows(id, 4);

  const auto result = run_surge(dir, drain_args(queue));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (const auto row : rows) {
    const auto state = queue.row(row);
    EXPECT_EQ(state.status, "dead") << "row " << row << " was refused";
    EXPECT_EQ(state.last_status.value_or(0), 500) << "row " << row << ": " << state.last_error;
  }
  EXPECT_EQ(server.requests().size(), rows.size());
}

TEST(DrainWire, EmitRefusesAnEventTypeWithControlCharacters) {
  temp_dir dir;
  test_queue queue(dir);
  queue.add_subscriber("http://placeholder/", 10, 10);
  for (const std::string type : {"a\r\nb", "a\nX-Injected: 1", "a\x07"}) {
    const auto result =
        run_surge(dir, {"emit", "--db", queue.path(), "--type", type, "--data", "{}"});
    EXPECT_EQ(result.exit_code, 2) << result.out << result.err;
    EXPECT_NE(result.err.find("--type contains"), npos) << result.err;
  }
  EXPECT_TRUE(queue.count_by_status().empty());
  const auto fine =
      run_surge(dir, {"emit", "--db", queue.path(), "--type", "video.trending", "--data", "{}"});
  EXPECT_EQ(fine.exit_code, 0) << fine.err;
}

// The idle check must not mistake TLS housekeeping (TLS 1.3 session tickets) for a stray
// response: a healthy HTTPS connection is still reused.
TEST(DrainWire, HealthyTlsConnectionsAreStillReused) {
  for (const std::string version : {"", "1.2"}) {
    temp_dir dir;
    const auto pki = make_test_pki(dir.path());
    test_queue queue(dir);
    sink_process sink(
        dir, queue.path(),
        {.tls_cert = pki.server_cert, .tls_key = pki.server_key, .tls_max_version = version});
    const auto id = queue.add_subscriber("http://placeholder/", 1000, 100);
    queue.set_url(id, sink.url_for(id, true, "localhost"));
    set_max_in_flight(queue, id, 1);
    const auto rows = queue.add_rows(id, 12);
    const auto result = run_surge(dir, drain_args(queue, {"--ca-file", pki.ca_cert}));
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_EQ(queue.count_by_status()["done"], static_cast<std::int64_t>(rows.size()));
    const auto requests = sink.stop_and_read();
    std::set<std::uint64_t> connections;
    for (const auto& request : requests) connections.insert(request.connection_id);
    EXPECT_EQ(requests.size(), rows.size());
    EXPECT_LE(connections.size(), 2u) << "TLS " << (version.empty() ? "1.3" : version);
  }
}

}  // namespace
}  // namespace surge::testing
