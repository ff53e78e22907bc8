#include "tests/support/dns_server.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/steady_timer.hpp>

namespace surge::testing {

namespace asio = boost::asio;
using udp = asio::ip::udp;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

struct question {
  std::string name;
  std::uint16_t type = 0;
  std::size_t end = 0;  // offset just past the question
};

std::optional<question> parse_question(const std::uint8_t* p, std::size_t n) {
  if (n < 12 || p[4] != 0 || p[5] != 1) return std::nullopt;
  question q;
  std::size_t at = 12;
  while (at < n && p[at] != 0) {
    const std::size_t len = p[at];
    if (len > 63 || at + 1 + len >= n) return std::nullopt;
    if (!q.name.empty()) q.name += '.';
    q.name.append(reinterpret_cast<const char*>(p + at + 1), len);
    at += 1 + len;
  }
  if (at + 5 > n) return std::nullopt;
  q.type = static_cast<std::uint16_t>(p[at + 1] << 8 | p[at + 2]);
  q.end = at + 5;
  q.name = lower(q.name);
  return q;
}

void put16(std::vector<std::uint8_t>& out, std::uint16_t v) {
  out.push_back(static_cast<std::uint8_t>(v >> 8));
  out.push_back(static_cast<std::uint8_t>(v & 0xff));
}

}  // namespace

struct dns_server::impl {
  asio::io_context io;
  udp::socket socket{io, udp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  std::array<std::uint8_t, 512> buffer{};
  udp::endpoint from;
  mutable std::mutex mutex;
  std::map<std::string, rule> rules;
  std::map<std::string, int> a_counts;
  std::thread thread;
  std::uint16_t port = socket.local_endpoint().port();

  void receive() {
    socket.async_receive_from(asio::buffer(buffer), from,
                              [this](const boost::system::error_code& ec, std::size_t n) {
                                if (ec == asio::error::operation_aborted) return;
                                if (!ec) answer(n);
                                receive();
                              });
  }

  void answer(std::size_t n) {
    const auto q = parse_question(buffer.data(), n);
    if (!q) return;
    rule r;
    {
      std::lock_guard lock(mutex);
      if (q->type == 1) ++a_counts[q->name];
      auto found = rules.find(q->name);
      if (found == rules.end()) {
        r.what = rule::kind::nxdomain;
      } else {
        r = found->second;
      }
    }
    if (r.what == rule::kind::silent) return;
    auto reply =
        std::make_shared<std::vector<std::uint8_t>>(buffer.begin(), buffer.begin() + q->end);
    auto& out = *reply;
    const std::uint8_t rcode = r.what == rule::kind::nxdomain ? 3 : 0;
    out[2] = static_cast<std::uint8_t>(0x84 | (out[2] & 0x01));  // QR, AA, RD as asked
    out[3] = static_cast<std::uint8_t>(0x80 | rcode);            // RA
    const bool with_addresses = r.what == rule::kind::answer && q->type == 1;
    const auto count = with_addresses ? r.ipv4.size() : 0;
    out[6] = 0;
    out[7] = static_cast<std::uint8_t>(count);
    out[8] = out[9] = out[10] = out[11] = 0;
    for (std::size_t i = 0; i < count; ++i) {
      put16(out, 0xc00c);  // the question's name
      put16(out, 1);       // A
      put16(out, 1);       // IN
      put16(out, static_cast<std::uint16_t>(r.ttl >> 16));
      put16(out, static_cast<std::uint16_t>(r.ttl & 0xffff));
      put16(out, 4);
      const auto bytes = asio::ip::make_address_v4(r.ipv4[i]).to_bytes();
      out.insert(out.end(), bytes.begin(), bytes.end());
    }
    auto to = from;
    auto send = [this, reply, to] {
      boost::system::error_code ignored;
      socket.send_to(asio::buffer(*reply), to, 0, ignored);
    };
    if (r.delay.count() == 0) {
      send();
      return;
    }
    auto timer = std::make_shared<asio::steady_timer>(io, r.delay);
    timer->async_wait([timer, send](const boost::system::error_code& ec) {
      if (!ec) send();
    });
  }
};

dns_server::dns_server() : impl_(std::make_unique<impl>()) {
  impl_->receive();
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

dns_server::~dns_server() {
  impl_->io.stop();
  impl_->thread.join();
}

void dns_server::set(const std::string& name, rule r) {
  std::lock_guard lock(impl_->mutex);
  impl_->rules[lower(name)] = std::move(r);
}

std::uint16_t dns_server::port() const { return impl_->port; }

int dns_server::a_queries(const std::string& name) const {
  std::lock_guard lock(impl_->mutex);
  auto found = impl_->a_counts.find(lower(name));
  return found == impl_->a_counts.end() ? 0 : found->second;
}

}  // namespace surge::testing
