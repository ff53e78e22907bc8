#pragma once
// The queue's DDL exactly as docs/design.md gives it: what the other programs that share the
// database run. Tests create files with it to prove Surge works on them, so it is kept here
// verbatim and apart from storage/sqlite/schema.cpp, which must not be its source.
namespace surge::testing {

inline constexpr const char* shared_ddl = R"sql(
CREATE TABLE webhook_subscriber (
  id INTEGER PRIMARY KEY, url TEXT NOT NULL, secret TEXT NOT NULL,
  event_types TEXT NOT NULL DEFAULT '*',           -- '*', exact types, 'video.*' prefixes, comma-separated
  rate_per_sec REAL NOT NULL DEFAULT 5.0,          -- a per-minute limit is rate_per_sec = n/60
  burst INTEGER NOT NULL DEFAULT 10,
  tokens REAL NOT NULL DEFAULT 10.0,               -- persisted bucket, used by the steady-state drainer
  tokens_updated_at REAL NOT NULL DEFAULT 0,
  active INTEGER NOT NULL DEFAULT 1);
CREATE TABLE webhook_delivery (
  id INTEGER PRIMARY KEY,
  subscriber_id INTEGER NOT NULL REFERENCES webhook_subscriber(id),
  event_type TEXT NOT NULL, payload TEXT NOT NULL, -- payload: the exact bytes to POST
  status TEXT NOT NULL DEFAULT 'pending',          -- pending | retry | done | dead
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at REAL NOT NULL DEFAULT 0,         -- due when next_attempt_at <= now
  locked_until REAL NOT NULL DEFAULT 0,            -- lease; free when locked_until <= now
  created_at REAL NOT NULL);
CREATE INDEX idx_delivery_due ON webhook_delivery(status, next_attempt_at)
  WHERE status IN ('pending', 'retry');
)sql";

}  // namespace surge::testing
