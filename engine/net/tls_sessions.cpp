#include "engine/net/tls_sessions.hpp"

#include <utility>

#include "engine/bounded_file.hpp"

namespace surge::engine {

namespace ssl = boost::asio::ssl;

namespace {

// The SSL object's slot for its tls_session_home. Asio keeps its own data in the app-data
// slot (index 0), so this one is allocated.
int home_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

// OpenSSL calls this on the thread driving `ssl`, which is the shard that owns the connection
// and its cache, so the shared SSL_CTX needs no lock here. Returning 1 keeps the reference
// OpenSSL passed in.
int on_new_session(SSL* ssl, SSL_SESSION* session) {
  auto* home = static_cast<tls_session_home*>(SSL_get_ex_data(ssl, home_index()));
  if (home == nullptr || home->cache == nullptr) return 0;
  if (home->cache->store(home->origin_key, session_ptr(session)) && home->on_stored) {
    home->on_stored();
  }
  return 1;
}

// The server would refuse an expired session and fall back to a full handshake anyway.
// OpenSSL marks a session unresumable once a TLS 1.3 resumption used it, or when a connection
// that used it is freed after a failure (no close_notify).
bool offerable(SSL_SESSION* session, std::time_t now) {
  const auto expires = static_cast<std::time_t>(SSL_SESSION_get_time(session)) +
                       static_cast<std::time_t>(SSL_SESSION_get_timeout(session));
  return expires > now && SSL_SESSION_is_resumable(session) == 1;
}

}  // namespace

std::shared_ptr<ssl::context> make_client_tls_context(const http_client_config& config) {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  SSL_CTX* native = context->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  // Early data is never sent: a replayed 0-RTT POST would be a duplicate delivery.
  SSL_CTX_set_max_early_data(native, 0);
  // OpenSSL never looks client sessions up by itself; the callback hands each new one to the
  // connection's shard. No internal store: it would keep every session behind the context's
  // lock, shared by all shards, and grow to 20,000 entries; hence no auto-clear of it either.
  SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE |
                                             SSL_SESS_CACHE_NO_AUTO_CLEAR);
  SSL_CTX_sess_set_new_cb(native, on_new_session);
  // A connection waiting for its next request keeps no record buffers: OpenSSL frees them
  // whenever they are empty. Asio's stream sets it on each SSL object too; on the context it
  // holds for every SSL object made from it.
  SSL_CTX_set_mode(native, SSL_MODE_RELEASE_BUFFERS);
  home_index();  // allocated here, before the shards' threads start
  context->set_verify_mode(ssl::verify_peer);
  if (config.ca_file) {
    // Read here with a bound, not by OpenSSL from the path: a bundle named /dev/zero would
    // never end. Every certificate of the bundle is added.
    const auto bundle = read_bounded_file(*config.ca_file, max_pem_file_bytes, "CA file");
    context->add_certificate_authority(boost::asio::buffer(bundle));
  } else {
    context->set_default_verify_paths();
  }
  return context;
}

void tls_session_cache::touch(entry& e) { recency_.splice(recency_.begin(), recency_, e.recency); }

bool tls_session_cache::store(const std::string& origin_key, session_ptr session) {
  if (!session || SSL_SESSION_is_resumable(session.get()) != 1 || capacity_ == 0) return false;
  auto found = entries_.find(origin_key);
  if (found == entries_.end()) {
    recency_.push_front(origin_key);
    found = entries_.emplace(origin_key, entry{{}, recency_.begin()}).first;
  } else {
    touch(found->second);
  }
  auto& sessions = found->second.sessions;
  if (SSL_SESSION_get_protocol_version(session.get()) < TLS1_3_VERSION) {
    // A TLS 1.2 session serves every connection, so the newest is the only one worth keeping
    // (a server that never resumes would otherwise fill the cache with one per connection).
    sessions_ -= sessions.size();
    sessions.clear();
  }
  sessions.push_front(std::move(session));
  ++sessions_;
  while (sessions_ > capacity_) {
    auto& oldest = entries_.at(recency_.back());
    oldest.sessions.pop_back();
    --sessions_;
    if (oldest.sessions.empty()) {
      const std::string key = recency_.back();  // forget erases the list's copy
      forget(key);
    }
  }
  return true;
}

session_ptr tls_session_cache::take(const std::string& origin_key, std::time_t now) {
  auto found = entries_.find(origin_key);
  if (found == entries_.end()) return nullptr;
  auto& sessions = found->second.sessions;
  while (!sessions.empty()) {
    SSL_SESSION* session = sessions.front().get();
    if (!offerable(session, now)) {
      sessions.pop_front();
      --sessions_;
      continue;
    }
    touch(found->second);
    if (SSL_SESSION_get_protocol_version(session) >= TLS1_3_VERSION) {
      if (sessions.size() == 1) {
        // The origin's last ticket stays, unused (so still resumable); a copy is offered.
        if (session_ptr copy(SSL_SESSION_dup(session)); copy) return copy;
      }
      session_ptr once = std::move(sessions.front());
      sessions.pop_front();
      --sessions_;
      if (sessions.empty()) forget(origin_key);
      return once;
    }
    SSL_SESSION_up_ref(session);
    return session_ptr(session);
  }
  forget(origin_key);
  return nullptr;
}

bool tls_session_cache::has(const std::string& origin_key, std::time_t now) const {
  auto found = entries_.find(origin_key);
  if (found == entries_.end()) return false;
  for (const auto& held : found->second.sessions) {
    if (offerable(held.get(), now)) return true;
  }
  return false;
}

void tls_session_cache::forget(const std::string& origin_key) {
  auto found = entries_.find(origin_key);
  if (found == entries_.end()) return;
  sessions_ -= found->second.sessions.size();
  recency_.erase(found->second.recency);
  entries_.erase(found);
}

void prepare_resumption(SSL* ssl, tls_session_home& home) {
  SSL_set_ex_data(ssl, home_index(), &home);
  if (home.cache == nullptr) return;
  // SSL_set_session takes a reference of its own.
  if (const auto session = home.cache->take(home.origin_key, std::time(nullptr))) {
    SSL_set_session(ssl, session.get());
  }
}

}  // namespace surge::engine
