#pragma once
// Sans-I/O rules for one keep-alive connection and for an origin's idle list.
// The Asio layer reports what happened; these classes decide reuse, retry and eviction, so the
// decisions are tested without sockets.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "engine/memory/node_cache.hpp"

namespace surge::engine {

using steady_time = std::chrono::steady_clock::time_point;

enum class connection_phase { connecting, busy, idle, closed };

// How a response ended, as the reader saw it. A connection carries another request only when
// its framing is certain: otherwise the next request could read this one's leftovers (or a
// response the server sent on its own) as its answer.
struct response_end {
  bool final_status = false;         // a final (non-1xx) status line and header were read
  bool switching_protocols = false;  // 101: the connection no longer speaks HTTP/1.1 to us
  bool keep_alive = false;           // the server keeps it open (HTTP/1.1 without close, or 1.0
                                     // with keep-alive) and the body is not delimited by EOF
  bool read_whole = false;           // the whole body was read
  bool bytes_left = false;           // bytes beyond the response were already received
  bool early = false;                // response bytes arrived before the request was fully written
};

// The one reuse rule: every condition must hold.
bool reusable_after(const response_end& end);

class connection_lifecycle {
 public:
  connection_phase phase() const { return phase_; }
  int exchanges() const { return exchanges_; }

  void on_connected();
  // A request starts on this connection (fresh or taken from the idle list).
  void on_exchange_start();
  void on_response_byte() { response_started_ = true; }
  // The response was read; the connection returns to the pool only if reusable_after(end).
  void on_response_complete(const response_end& end);
  void on_failure();
  // Checked just before an idle connection is reused: anything that arrived while it sat idle
  // (bytes, EOF, an error) is not an answer to a request we sent, so the connection is closed.
  void on_idle_check(bool input_pending);

  // After an exchange, whether its request goes out once more on a new connection: only after
  // a failure on a reused connection before any response byte (the server most likely closed
  // the idle connection as we wrote), and only while the attempt's deadline leaves time. The
  // retry's connection is new, so a request is retried at most once.
  bool retry_on_fresh_connection(steady_time now, steady_time deadline) const;
  // Whether the connection ended without a failure (a response read whole, or closed idle),
  // so that its TLS session may be offered again: OpenSSL keeps that only for connections it
  // saw shut down cleanly.
  bool ended_cleanly() const { return phase_ != connection_phase::connecting && !failed_; }

 private:
  connection_phase phase_ = connection_phase::connecting;
  int exchanges_ = 0;
  bool response_started_ = false;
  bool failed_ = false;
};

// Most recently used first: the newest idle connection is the least likely to have been closed
// by the server. Entries idle for `idle_timeout` or more are handed back for closing.
template <class Connection>
class idle_list {
 public:
  explicit idle_list(std::chrono::steady_clock::duration idle_timeout)
      : idle_timeout_(idle_timeout) {}

  void put(Connection connection, steady_time now) {
    entries_.emplace_front(std::move(connection), now);
  }

  // The freshest usable connection, if any; expired ones are moved to `expired`.
  std::optional<Connection> take(steady_time now, std::vector<Connection>& expired) {
    evict(now, expired);
    if (entries_.empty()) return std::nullopt;
    Connection connection = std::move(entries_.front().first);
    entries_.pop_front();
    return connection;
  }

  void evict(steady_time now, std::vector<Connection>& expired) {
    while (!entries_.empty() && now - entries_.back().second >= idle_timeout_) {
      expired.push_back(std::move(entries_.back().first));
      entries_.pop_back();
    }
  }

  void clear(std::vector<Connection>& out) {
    for (auto& entry : entries_) out.push_back(std::move(entry.first));
    entries_.clear();
  }

  std::size_t size() const { return entries_.size(); }

  // When the entry idle longest was parked, if there is one.
  std::optional<steady_time> longest_idle_since() const {
    if (entries_.empty()) return std::nullopt;
    return entries_.back().second;
  }
  // The entry idle longest (to be closed for room); empty() must be false.
  Connection take_longest_idle() {
    Connection connection = std::move(entries_.back().first);
    entries_.pop_back();
    return connection;
  }

  template <class Visit>
  void for_each(Visit visit) const {
    for (const auto& entry : entries_) visit(entry.first);
  }

  // Visits the connections idle since `since` or longer, newest first, until `visit` returns
  // false: a sweep that changes each connection it visits (and says false for one it changed
  // before) visits each once, not every idle connection at every sweep, since the ones idle
  // longer were all changed by an earlier sweep.
  template <class Visit>
  void for_each_idle_since(steady_time since, Visit visit) {
    auto it = std::partition_point(entries_.begin(), entries_.end(),
                                   [since](const entry& e) { return e.second > since; });
    for (; it != entries_.end() && visit(it->first); ++it) {
    }
  }

 private:
  std::chrono::steady_clock::duration idle_timeout_;
  using entry = std::pair<Connection, steady_time>;
  std::deque<entry, node_cache_allocator<entry>> entries_;  // newest at the front
};

}  // namespace surge::engine
