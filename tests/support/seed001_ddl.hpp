#pragma once
// The second published queue shape ("seed 001") exactly as its write-up gives it: what its
// producer and its PHP worker run. Tests create files with it to prove Surge drains them; it is
// kept here verbatim, apart from storage/, which never creates these tables.
namespace surge::testing {

inline constexpr const char* seed001_ddl = R"sql(
CREATE TABLE webhook_subscribers (id INTEGER PRIMARY KEY, endpoint TEXT NOT NULL, secret TEXT NOT NULL,
  events TEXT NOT NULL /* JSON array */, rate_per_min INTEGER NOT NULL DEFAULT 60,
  burst INTEGER NOT NULL DEFAULT 20, region TEXT NOT NULL /* ISO country, GDPR routing */,
  active INTEGER NOT NULL DEFAULT 1);
CREATE TABLE webhook_deliveries (id INTEGER PRIMARY KEY, subscriber_id INTEGER NOT NULL REFERENCES webhook_subscribers(id),
  event_type TEXT NOT NULL, payload BLOB NOT NULL, signature TEXT NOT NULL, enqueued_at INTEGER NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 0, next_attempt INTEGER NOT NULL, leased_until INTEGER NOT NULL DEFAULT 0,
  state TEXT NOT NULL DEFAULT 'pending');
CREATE INDEX idx_deliveries_due ON webhook_deliveries (state, next_attempt) WHERE state = 'pending';
CREATE TABLE webhook_buckets (subscriber_id INTEGER PRIMARY KEY REFERENCES webhook_subscribers(id),
  tokens REAL NOT NULL, updated_at REAL NOT NULL);
)sql";

}  // namespace surge::testing
