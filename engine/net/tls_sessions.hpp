#pragma once
// The client's TLS context and session resumption. A new connection to an
// origin seen before offers the newest session its shard got from that origin (a TLS 1.3
// ticket, or a TLS 1.2 session id or ticket), so a burst of new connections costs one full
// handshake per origin and shard instead of one each (without it, a drain can start with
// 1,600 full handshakes to one origin).
#include <cstddef>
#include <ctime>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>

#include <boost/asio/ssl/context.hpp>
#include <openssl/ssl.h>

#include "engine/config.hpp"

namespace surge::engine {

// Builds the TLS context every shard shares: peer verification against the system store or
// `ca_file`, TLS 1.2 minimum, no early data, and client session caching through
// prepare_resumption. Throws on a bad CA file.
std::shared_ptr<boost::asio::ssl::context> make_client_tls_context(
    const http_client_config& config);

struct session_free {
  void operator()(SSL_SESSION* session) const { SSL_SESSION_free(session); }
};
using session_ptr = std::unique_ptr<SSL_SESSION, session_free>;

// One shard's sessions per origin key ("scheme://host:port", so the SNI name and the name the
// certificate was verified for are part of the key), newest first, at most `capacity` in all:
// beyond that the oldest session of the least recently used origin goes. A session holds the
// ticket and a reference to the peer's certificate, hence the bound. Not thread-safe: each
// shard has its own, filled and read on its own thread.
//
// A TLS 1.3 ticket is offered once while the origin has others (RFC 8446 C.4 asks clients not
// to reuse one; OpenSSL marks it used after a resumption): each connection takes one and gets
// at least one new ticket back, which arrives with its first response. The origin's last
// ticket is not given away but offered as a copy, again and again until newer ones arrive: a
// burst of new connections then resumes instead of each doing a full handshake. Servers with
// single-use tickets answer such a copy with a full handshake, which the connection would have
// done anyway. A TLS 1.2 session is offered until it expires, as TLS 1.2 servers expect, and
// only the newest is kept.
class tls_session_cache {
 public:
  explicit tls_session_cache(std::size_t capacity) : capacity_(capacity) {}

  // Keeps `session` as the origin's newest and says so. Sessions that cannot be resumed (no
  // ticket, no id) are not kept.
  bool store(const std::string& origin_key, session_ptr session);
  // A reference to the session to offer to `origin_key` (newest first; a copy of the last TLS
  // 1.3 ticket), or null when there is none that is resumable and unexpired at `now` (Unix
  // seconds).
  session_ptr take(const std::string& origin_key, std::time_t now);
  // Whether take() would give a session now.
  bool has(const std::string& origin_key, std::time_t now) const;
  // After a failed handshake: whatever the origin gave before is not offered again.
  void forget(const std::string& origin_key);
  std::size_t origins() const { return entries_.size(); }
  std::size_t sessions() const { return sessions_; }

 private:
  struct entry {
    std::deque<session_ptr> sessions;  // newest first
    std::list<std::string>::iterator recency;
  };
  void touch(entry& e);

  std::size_t capacity_;
  std::size_t sessions_ = 0;
  std::list<std::string> recency_;  // most recently used first
  std::unordered_map<std::string, entry> entries_;
};

// Where the sessions a connection receives go: its shard's cache, under its origin's key. It
// must outlive every SSL object prepared with it (the client keeps it in its origin table).
struct tls_session_home {
  tls_session_cache* cache = nullptr;
  std::string origin_key;
  // Told after a session of the origin was stored (engine/net/handshake_gate.hpp's waiters).
  std::function<void()> on_stored;
};

// Before the handshake of a new connection: tickets the server sends on `ssl` (in TLS 1.3 they
// arrive after the handshake, while the first response is read) go to `home`, and the newest
// session cached there, if any, is offered.
void prepare_resumption(SSL* ssl, tls_session_home& home);

}  // namespace surge::engine
