#pragma once
// Name lookups for one shard, through c-ares on the shard's own io_context: every lookup runs
// at once on shared sockets, so one partner whose name server is slow, failing or silent
// delays only the connects to that partner (Asio's resolver runs getaddrinfo on one thread,
// one lookup at a time, and a lookup given up on keeps it busy). Answers are kept per
// engine/net/dns_cache.hpp. Not thread-safe: each shard has its own.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "engine/config.hpp"
#include "engine/net/dns_cache.hpp"

// c-ares's types, kept out of the engine's headers.
struct ares_channeldata;
struct ares_addrinfo;

namespace surge::engine {

struct dns_lookup {
  dns_answer answer;       // addresses, or answer.error
  bool timed_out = false;  // the caller's deadline came first (the lookup may still finish)
};

class dns_resolver {
 public:
  // Throws std::runtime_error when c-ares cannot start or config.servers is not a list of
  // name servers.
  dns_resolver(boost::asio::any_io_executor executor, const dns_config& config);
  ~dns_resolver();
  dns_resolver(const dns_resolver&) = delete;
  dns_resolver& operator=(const dns_resolver&) = delete;

  // The addresses of `host`, kept or looked up, waited for until `deadline` at most. A lookup
  // waited for by nobody any more goes on within c-ares's own timeouts and its answer is kept.
  boost::asio::awaitable<dns_lookup> resolve(const std::string& host,
                                             std::chrono::steady_clock::time_point deadline);

  // Lookups sent to c-ares so far (each name once per TTL while it is in use).
  std::int64_t lookups_started() const { return lookups_started_; }

 private:
  struct waiter;
  class waiting;
  struct socket_watch;
  struct query;
  static void on_socket_state(void* self, int fd, int readable, int writable);
  static void on_addrinfo(void* arg, int status, int timeouts, ares_addrinfo* result);
  void start_lookup(const std::string& host);
  void finish(const std::string& host, dns_answer answer, std::chrono::seconds ttl);
  void watch_socket(const std::shared_ptr<socket_watch>& watch);
  // After every call into c-ares: the timer wakes it for its next retry or timeout.
  void arm_timer();

  boost::asio::any_io_executor executor_;
  dns_cache cache_;
  ares_channeldata* channel_ = nullptr;
  bool destroying_ = false;
  std::int64_t lookups_started_ = 0;
  std::unordered_map<std::string, std::vector<waiter*>> waiters_;
  std::unordered_map<int, std::shared_ptr<socket_watch>> sockets_;
  boost::asio::steady_timer timer_;
};

}  // namespace surge::engine
