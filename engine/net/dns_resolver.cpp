#include "engine/net/dns_resolver.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <utility>

#include <ares.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <boost/asio/posix/stream_descriptor.hpp>

#include "engine/awaiting.hpp"

namespace surge::engine {

namespace asio = boost::asio;
using boost::system::error_code;

struct dns_resolver::waiter {
  waiter(const asio::any_io_executor& executor, std::chrono::steady_clock::time_point deadline)
      : timer(executor, deadline) {}
  asio::steady_timer timer;  // cancelled when the answer comes
  std::optional<dns_answer> answer;
  dns_resolver* owner = nullptr;  // reset if the resolver goes first (shutdown)
};

// Registers a waiter for a name, and takes it off again however its coroutine ends.
class dns_resolver::waiting {
 public:
  waiting(dns_resolver& resolver, const std::string& host, waiter& w) : host_(host), w_(w) {
    resolver.waiters_[host].push_back(&w);
    w.owner = &resolver;
  }
  ~waiting() {
    if (w_.owner == nullptr) return;
    auto found = w_.owner->waiters_.find(host_);
    if (found == w_.owner->waiters_.end()) return;
    std::erase(found->second, &w_);
    if (found->second.empty()) w_.owner->waiters_.erase(found);
  }
  waiting(const waiting&) = delete;
  waiting& operator=(const waiting&) = delete;

 private:
  std::string host_;
  waiter& w_;
};

// A socket c-ares opened, watched for what c-ares wants from it. c-ares owns the descriptor:
// it is released, never closed, here.
struct dns_resolver::socket_watch {
  socket_watch(const asio::any_io_executor& executor, int fd) : fd(fd), descriptor(executor, fd) {}
  int fd;
  asio::posix::stream_descriptor descriptor;
  bool want_read = false;
  bool want_write = false;
  bool reading = false;
  bool writing = false;
  bool closed = false;

  void close() {
    closed = true;
    error_code ignored;
    descriptor.cancel(ignored);
    descriptor.release();
  }
};

struct dns_resolver::query {
  dns_resolver* resolver;
  std::string host;
};

namespace {

std::once_flag library_once;

std::optional<proto::ip_address> to_address(const sockaddr* address) {
  proto::ip_address out;
  if (address->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    std::memcpy(out.bytes.data(), &v4->sin_addr, 4);
    return out;
  }
  if (address->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);
    out.v6 = true;
    std::memcpy(out.bytes.data(), &v6->sin6_addr, 16);
    return out;
  }
  return std::nullopt;
}

}  // namespace

dns_resolver::dns_resolver(asio::any_io_executor executor, const dns_config& config)
    : executor_(std::move(executor)), cache_(config), timer_(executor_) {
  std::call_once(library_once, [] { ares_library_init(ARES_LIB_INIT_ALL); });
  ares_options options{};
  options.sock_state_cb = &dns_resolver::on_socket_state;
  options.sock_state_cb_data = this;
  options.timeout =
      static_cast<int>(std::clamp<std::int64_t>(config.try_timeout.count(), 1, INT_MAX));
  options.tries = std::max(config.tries, 1);
  const int mask = ARES_OPT_SOCK_STATE_CB | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES;
  if (const int status = ares_init_options(&channel_, &options, mask); status != ARES_SUCCESS) {
    throw std::runtime_error(std::string("cannot start the DNS resolver: ") +
                             ares_strerror(status));
  }
  if (!config.servers.empty()) {
    if (const int status = ares_set_servers_ports_csv(channel_, config.servers.c_str());
        status != ARES_SUCCESS) {
      ares_destroy(channel_);
      throw std::runtime_error("DNS servers \"" + config.servers + "\": " + ares_strerror(status));
    }
  }
}

dns_resolver::~dns_resolver() {
  // c-ares closes its sockets (each reported to on_socket_state) and ends its lookups (each
  // reported with ARES_EDESTRUCTION, which touches nothing here).
  destroying_ = true;
  ares_destroy(channel_);
  for (auto& [fd, watch] : sockets_) watch->close();
  for (auto& [host, list] : waiters_) {
    for (auto* w : list) w->owner = nullptr;
  }
}

void dns_resolver::on_socket_state(void* self_ptr, int fd, int readable, int writable) {
  auto& self = *static_cast<dns_resolver*>(self_ptr);
  auto found = self.sockets_.find(fd);
  if (!readable && !writable) {
    // c-ares is about to close it.
    if (found != self.sockets_.end()) {
      found->second->close();
      self.sockets_.erase(found);
    }
    return;
  }
  if (self.destroying_) return;
  if (found == self.sockets_.end()) {
    found = self.sockets_.emplace(fd, std::make_shared<socket_watch>(self.executor_, fd)).first;
  }
  found->second->want_read = readable != 0;
  found->second->want_write = writable != 0;
  self.watch_socket(found->second);
}

void dns_resolver::watch_socket(const std::shared_ptr<socket_watch>& watch) {
  using wait = asio::posix::stream_descriptor::wait_type;
  if (watch->want_read && !watch->reading) {
    watch->reading = true;
    watch->descriptor.async_wait(wait::wait_read, [this, watch](const error_code& ec) {
      watch->reading = false;
      if (watch->closed || ec) return;
      ares_process_fd(channel_, watch->fd, ARES_SOCKET_BAD);
      arm_timer();
      if (!watch->closed) watch_socket(watch);
    });
  }
  if (watch->want_write && !watch->writing) {
    watch->writing = true;
    watch->descriptor.async_wait(wait::wait_write, [this, watch](const error_code& ec) {
      watch->writing = false;
      if (watch->closed || ec) return;
      ares_process_fd(channel_, ARES_SOCKET_BAD, watch->fd);
      arm_timer();
      if (!watch->closed) watch_socket(watch);
    });
  }
}

void dns_resolver::arm_timer() {
  timeval wait{};
  if (ares_timeout(channel_, nullptr, &wait) == nullptr) {
    timer_.cancel();  // nothing under way: an idle shard holds no pending wait
    return;
  }
  timer_.expires_after(std::chrono::seconds(wait.tv_sec) + std::chrono::microseconds(wait.tv_usec));
  timer_.async_wait([this](const error_code& ec) {
    if (ec) return;  // set again or cancelled since
    ares_process_fd(channel_, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
    arm_timer();
  });
}

void dns_resolver::start_lookup(const std::string& host) {
  ++lookups_started_;
  ares_addrinfo_hints hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  // The callback may run before ares_getaddrinfo returns (a name from /etc/hosts, a failure
  // to send): the asker's waiter is registered before this call for that reason.
  ares_getaddrinfo(channel_, host.c_str(), nullptr, &hints, &dns_resolver::on_addrinfo,
                   new query{this, host});
  arm_timer();
}

void dns_resolver::on_addrinfo(void* arg, int status, int /*timeouts*/, ares_addrinfo* result) {
  std::unique_ptr<query> q(static_cast<query*>(arg));
  struct free_result {
    void operator()(ares_addrinfo* r) const { ares_freeaddrinfo(r); }
  };
  std::unique_ptr<ares_addrinfo, free_result> owned(result);
  if (status == ARES_EDESTRUCTION || q->resolver->destroying_) return;

  dns_answer answer;
  int ttl = INT_MAX;
  if (status == ARES_SUCCESS && result != nullptr) {
    for (auto* node = result->nodes; node != nullptr; node = node->ai_next) {
      auto address = to_address(node->ai_addr);
      if (!address) continue;
      answer.addresses.push_back(*address);
      ttl = std::min(ttl, std::max(node->ai_ttl, 0));
    }
  }
  if (answer.addresses.empty()) {
    answer.error = status == ARES_SUCCESS ? "no address" : ares_strerror(status);
    ttl = 0;
  }
  q->resolver->finish(q->host, std::move(answer), std::chrono::seconds(ttl));
}

void dns_resolver::finish(const std::string& host, dns_answer answer, std::chrono::seconds ttl) {
  const auto& kept =
      cache_.on_answer(host, std::move(answer), ttl, std::chrono::steady_clock::now());
  auto found = waiters_.find(host);
  if (found == waiters_.end()) return;
  auto list = std::move(found->second);
  waiters_.erase(found);
  for (auto* w : list) {
    w->answer = kept;
    w->owner = nullptr;  // already off the list
    w->timer.cancel();
  }
}

asio::awaitable<dns_lookup> dns_resolver::resolve(const std::string& host,
                                                  std::chrono::steady_clock::time_point deadline) {
  const auto decision = cache_.ask(host, std::chrono::steady_clock::now());
  if (decision.what == dns_cache::step::cached) co_return dns_lookup{*decision.answer};
  waiter w(executor_, deadline);
  waiting registered(*this, host, w);
  if (decision.what == dns_cache::step::start_lookup) start_lookup(host);
  if (!w.answer) co_await w.timer.async_wait(use_tuple);
  if (w.answer) co_return dns_lookup{std::move(*w.answer)};
  co_return dns_lookup{{}, true};
}

}  // namespace surge::engine
