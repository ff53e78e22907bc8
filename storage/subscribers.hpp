#pragma once
// Subscribers: loading, adding and changing them (their persisted token buckets:
// storage/token_leases.hpp). A neutral row: seed000's webhook_subscriber columns, which seed001's
// webhook_subscribers map onto (storage/seed001/queue.hpp); `event_types` is the filter as the
// shape stores it (seed001: a JSON array).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "proto/extra_headers.hpp"
#include "proto/id_set.hpp"
#include "proto/ordered_delivery.hpp"
#include "storage/connection.hpp"

namespace surge::storage {

struct subscriber_row {
  std::int64_t id = 0;
  std::string url;
  std::string secret;
  std::string event_types = "*";
  double rate_per_sec = 5.0;
  std::int64_t burst = 10;
  double tokens = 10.0;
  double tokens_updated_at = 0;
  bool active = true;
  std::string signing = "vvv";
  std::int64_t max_in_flight = 0;  // 0: the engine default
  // Batches (schema 3): up to batch_max rows in one POST, at most batch_bytes of body, waiting
  // at most batch_linger seconds for more rows. batch_max 1 sends one row per POST.
  std::int64_t batch_max = 1;
  std::int64_t batch_bytes = 1'048'576;
  double batch_linger = 0.5;
  // Coalescing (schema 3): a JSON pointer into the payload; empty turns it off.
  std::string coalesce_key;
  double coalesce_window = 10;
  std::string coalesce_events = "*";
  // seed001 only: the ISO country its deliveries are routed by (GDPR), which that shape requires.
  std::string region;
  // rate_per_sec and burst as stored, SQL-quoted ('fast', NULL), when they are not numbers (another
  // program can write text into any column); the numeric field then reads NaN (rate) or 0 (burst).
  std::optional<std::string> rate_text, burst_text;
  // Surge's own surge_subscriber_credential table (schema 8; either shape, keyed by subscriber
  // id): extra request headers in order, and the PEM files of a TLS client certificate and its
  // key. The files' paths are stored, never their contents: a drain reads them, so a key stays
  // in a file the operator protects, and a rotated file is picked up on the next reload.
  std::vector<proto::header_field> extra_headers;
  std::string client_cert_file, client_key_file;
  // The egress proxy this partner's connections leave through, "http://HOST:PORT" (schema 10);
  // empty: the drain's --proxy, or none.
  std::string proxy;
  // Ordered delivery per key (schema 9, surge_subscriber_order; storage/ordered_keys.hpp sets
  // it): nullopt for an unordered subscriber.
  std::optional<proto::order_rule> order;
};

// Whether add_subscriber/update_subscriber also write the row's credentials, and its order rule.
enum class credentials_write { keep, replace };
enum class order_write { keep, replace };

// On either kind of queue (storage/connection.hpp), as storage/sqlite/subscribers.hpp describes
// them on a SQLite file; throw storage::error. With credentials_write::replace, add_subscriber and
// update_subscriber also do what set_subscriber_credentials does, in the same transaction: a
// partner is never left with its settings written and the header or certificate it requires missing
// (or the reverse). With order_write::replace they write `order` as set_subscriber_order does
// (storage/ordered_keys.hpp), in the same transaction; on PostgreSQL the index the ordered claim
// reads is made or dropped once that transaction has committed. An update of no such subscriber
// writes nothing.
std::vector<subscriber_row> load_subscribers(connection& db, const proto::id_set& which = {});
std::optional<subscriber_row> load_subscriber(connection& db, std::int64_t id);
std::int64_t add_subscriber(connection& db, const subscriber_row& row,
                            credentials_write credentials = credentials_write::keep,
                            order_write order = order_write::keep);
bool update_subscriber(connection& db, const subscriber_row& row,
                       credentials_write credentials = credentials_write::keep,
                       order_write order = order_write::keep);
bool set_subscriber_active(connection& db, std::int64_t id, bool active);
void set_subscriber_credentials(connection& db, const subscriber_row& row);

}  // namespace surge::storage
