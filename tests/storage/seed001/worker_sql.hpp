#pragma once
// The seed001 shape's own programs, as its write-up has them run: the producer's inserts and the
// PHP worker's statements, on the shape's columns only. Shared by the storage tests and
// surge_seed001_worker, so both exercise exactly what those programs run beside Surge.
#include <string_view>

namespace surge::seed001_worker_sql {

// The worker's lease grab, 50 rows at a time. Parameters: until (now + lease), now, now; times
// in whole seconds (PHP's time()).
inline constexpr const char* lease_grab =
    "UPDATE webhook_deliveries SET leased_until = :until WHERE id IN (SELECT id FROM "
    "webhook_deliveries WHERE state = 'pending' AND next_attempt <= :now AND leased_until < :now "
    "ORDER BY next_attempt LIMIT 50)";
// The same grab, returning the rows it leased. Four workers run at once from cron: reading the
// rows back by `leased_until = :until` would also return the rows another worker leased in the
// same second, and both would send them.
inline constexpr const char* lease_grab_returning =
    "UPDATE webhook_deliveries SET leased_until = :until WHERE id IN (SELECT id FROM "
    "webhook_deliveries WHERE state = 'pending' AND next_attempt <= :now AND leased_until < :now "
    "ORDER BY next_attempt LIMIT 50) RETURNING id, subscriber_id";
// What it grabbed, for one worker alone. Parameter: the lease just written.
inline constexpr const char* read_back =
    "SELECT id, subscriber_id, event_type, payload, signature, attempt FROM webhook_deliveries "
    "WHERE leased_until = :until AND state = 'pending'";

// Its bucket transaction, one token per row: SELECT, then INSERT (no bucket yet) or UPDATE.
// Parameter: subscriber id.
inline constexpr const char* read_limits =
    "SELECT rate_per_min, burst FROM webhook_subscribers WHERE id = :id";
inline constexpr const char* read_bucket =
    "SELECT tokens, updated_at FROM webhook_buckets WHERE subscriber_id = :id";
// Parameters: subscriber id, tokens, updated_at.
inline constexpr const char* insert_bucket =
    "INSERT INTO webhook_buckets (subscriber_id, tokens, updated_at) VALUES (:id, :tokens, :at)";
inline constexpr const char* update_bucket =
    "UPDATE webhook_buckets SET tokens = :tokens, updated_at = :at WHERE subscriber_id = :id";

// Its outcome updates. Parameter: delivery id (and the next attempt's whole second).
inline constexpr const char* mark_delivered =
    "UPDATE webhook_deliveries SET state = 'delivered', attempt = attempt + 1, leased_until = 0 "
    "WHERE id = :id";
inline constexpr const char* mark_retry =
    "UPDATE webhook_deliveries SET attempt = attempt + 1, next_attempt = :next, leased_until = 0 "
    "WHERE id = :id";
inline constexpr const char* mark_dead =
    "UPDATE webhook_deliveries SET state = 'dead', attempt = attempt + 1, leased_until = 0 "
    "WHERE id = :id";
// An empty bucket: the row goes back, 2 s later, without an attempt.
inline constexpr const char* reschedule =
    "UPDATE webhook_deliveries SET next_attempt = :now + 2, leased_until = 0 WHERE id = :id";

// The producer. Parameters: endpoint, secret, events (a JSON array), rate_per_min, burst,
// region.
inline constexpr const char* insert_subscriber =
    "INSERT INTO webhook_subscribers (endpoint, secret, events, rate_per_min, burst, region) "
    "VALUES (?, ?, ?, ?, ?, ?)";
// Parameters: subscriber_id, event_type, payload (BLOB), signature (lowercase hex
// HMAC-SHA256(secret, payload)), enqueued_at, next_attempt (whole seconds).
inline constexpr const char* insert_delivery =
    "INSERT INTO webhook_deliveries (subscriber_id, event_type, payload, signature, enqueued_at, "
    "next_attempt) VALUES (?, ?, ?, ?, ?, ?)";

}  // namespace surge::seed001_worker_sql
