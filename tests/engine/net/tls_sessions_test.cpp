// The per-shard TLS session cache: newest sessions per origin, TLS 1.3 tickets used once, TLS
// 1.2 sessions reused, bounded, expired or spoilt sessions not offered. Real OpenSSL session
// objects; the handshakes that fill it are tested end to end against nginx
// (drain_tls_resume_test).
#include <gtest/gtest.h>

#include "engine/net/tls_sessions.hpp"

namespace surge::engine {
namespace {

constexpr std::time_t now = 1'800'000'000;

// A session OpenSSL would offer again: it has an id, a start time and a lifetime.
session_ptr resumable_session(unsigned char id, int version = TLS1_3_VERSION, long lifetime = 300) {
  session_ptr session(SSL_SESSION_new());
  const unsigned char session_id[1] = {id};
  EXPECT_EQ(SSL_SESSION_set1_id(session.get(), session_id, sizeof session_id), 1);
  EXPECT_EQ(SSL_SESSION_set_protocol_version(session.get(), version), 1);
  SSL_SESSION_set_time(session.get(), static_cast<long>(now));
  SSL_SESSION_set_timeout(session.get(), lifetime);
  EXPECT_EQ(SSL_SESSION_is_resumable(session.get()), 1);
  return session;
}

// The one-byte id a resumable_session was made with; -1 for none.
int id_of(const session_ptr& session) {
  if (!session) return -1;
  unsigned int length = 0;
  const unsigned char* id = SSL_SESSION_get_id(session.get(), &length);
  return length == 1 ? id[0] : -1;
}

TEST(TlsSessionCache, Tls13TicketsAreOfferedOnceNewestFirstToTheirOriginOnlyButTheLastIsCopied) {
  tls_session_cache cache(8);
  EXPECT_EQ(cache.take("https://a.example:443", now), nullptr);
  auto older = resumable_session(1);
  auto newer = resumable_session(2);
  SSL_SESSION* older_raw = older.get();
  SSL_SESSION* newer_raw = newer.get();
  cache.store("https://a.example:443", std::move(older));
  cache.store("https://a.example:443", std::move(newer));
  // Same host, another port or scheme: another origin, another certificate check.
  EXPECT_EQ(cache.take("https://a.example:8443", now), nullptr);
  EXPECT_EQ(cache.take("https://b.example:443", now), nullptr);

  EXPECT_EQ(cache.take("https://a.example:443", now).get(), newer_raw);
  // The last ticket stays; copies of it are offered, each resumable, until newer ones arrive.
  EXPECT_TRUE(cache.has("https://a.example:443", now));
  for (int i = 0; i < 3; ++i) {
    const auto copy = cache.take("https://a.example:443", now);
    ASSERT_NE(copy, nullptr);
    EXPECT_NE(copy.get(), older_raw);
    EXPECT_EQ(SSL_SESSION_is_resumable(copy.get()), 1);
    EXPECT_EQ(id_of(copy), 1) << "a copy of the older session";
  }
  EXPECT_EQ(cache.sessions(), 1u);
  auto newest = resumable_session(3);
  SSL_SESSION* newest_raw = newest.get();
  cache.store("https://a.example:443", std::move(newest));
  EXPECT_EQ(cache.take("https://a.example:443", now).get(), newest_raw) << "a new ticket first";
}

TEST(TlsSessionCache, AnExpiredLastTicketIsNotOfferedNorCopied) {
  tls_session_cache cache(8);
  cache.store("https://a:443", resumable_session(1, TLS1_3_VERSION, 300));
  EXPECT_NE(cache.take("https://a:443", now + 299), nullptr);
  EXPECT_FALSE(cache.has("https://a:443", now + 300));
  EXPECT_EQ(cache.take("https://a:443", now + 300), nullptr);
  EXPECT_EQ(cache.origins(), 0u);
}

TEST(TlsSessionCache, Tls12SessionsAreOfferedAgainUntilTheyExpire) {
  tls_session_cache cache(8);
  auto session = resumable_session(1, TLS1_2_VERSION, 300);
  SSL_SESSION* raw = session.get();
  cache.store("https://a:443", std::move(session));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(cache.take("https://a:443", now + 299).get(), raw);
  EXPECT_EQ(cache.take("https://a:443", now + 300), nullptr);
  EXPECT_EQ(cache.origins(), 0u);  // dropped, not kept taking a slot
}

TEST(TlsSessionCache, OnlyTheNewestTls12SessionIsKept) {
  tls_session_cache cache(8);
  cache.store("https://a:443", resumable_session(1, TLS1_2_VERSION));
  auto newer = resumable_session(2, TLS1_2_VERSION);
  SSL_SESSION* newer_raw = newer.get();
  cache.store("https://a:443", std::move(newer));
  EXPECT_EQ(cache.sessions(), 1u);
  EXPECT_EQ(cache.take("https://a:443", now).get(), newer_raw);
}

TEST(TlsSessionCache, SessionsThatCannotResumeAreNotKept) {
  tls_session_cache cache(8);
  EXPECT_FALSE(cache.store("https://a:443", session_ptr(SSL_SESSION_new())));  // no id, no ticket
  EXPECT_FALSE(cache.store("https://a:443", nullptr));
  EXPECT_TRUE(cache.store("https://b:443", resumable_session(1)));
  EXPECT_EQ(cache.origins(), 1u) << "only b's";
}

TEST(TlsSessionCache, BoundedInAllTheLeastRecentlyUsedOriginsOldestSessionDroppedFirst) {
  tls_session_cache cache(3);
  cache.store("https://a:443", resumable_session(1));
  cache.store("https://a:443", resumable_session(2));
  cache.store("https://b:443", resumable_session(3));
  cache.store("https://c:443", resumable_session(4));  // a is the least recently used: its 1 goes
  EXPECT_EQ(cache.sessions(), 3u);
  EXPECT_EQ(id_of(cache.take("https://a:443", now)), 2) << "1 was dropped";
  cache.store("https://d:443", resumable_session(5));  // b is now the least recently used
  EXPECT_EQ(cache.sessions(), 3u);
  EXPECT_EQ(cache.take("https://b:443", now), nullptr);
  EXPECT_EQ(id_of(cache.take("https://c:443", now)), 4);
  EXPECT_EQ(cache.origins(), 3u);

  tls_session_cache none(0);
  none.store("https://a:443", resumable_session(1));
  EXPECT_EQ(none.sessions(), 0u);
}

// OpenSSL marks a session unresumable when a connection that used it is freed after a failure,
// or once a TLS 1.3 resumption used it (SSL_CTX_remove_session is what it calls then).
TEST(TlsSessionCache, ForgottenSessionsOrThoseOpenSslGaveUpOnAreNotOffered) {
  tls_session_cache cache(8);
  auto session = resumable_session(1, TLS1_2_VERSION);
  SSL_SESSION* raw = session.get();
  cache.store("https://a:443", std::move(session));
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> context(SSL_CTX_new(TLS_client_method()),
                                                            &SSL_CTX_free);
  SSL_CTX_remove_session(context.get(), raw);
  EXPECT_EQ(cache.take("https://a:443", now), nullptr);

  cache.store("https://a:443", resumable_session(2));
  cache.forget("https://a:443");
  EXPECT_EQ(cache.take("https://a:443", now), nullptr);
  cache.forget("https://never-seen:443");
}

TEST(ClientTlsContext, ConnectionsGiveTheirRecordBuffersBackWhileTheyWait) {
  const auto context = make_client_tls_context(http_client_config{});
  EXPECT_NE(SSL_CTX_get_mode(context->native_handle()) & SSL_MODE_RELEASE_BUFFERS, 0u);
}

}  // namespace
}  // namespace surge::engine
