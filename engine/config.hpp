#pragma once
// Every knob of the drain engine, one struct per component, every timeout named.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/limits/adaptive_rate.hpp"
#include "engine/limits/circuit_breaker.hpp"
#include "engine/limits/origin_limit.hpp"
#include "engine/limits/shard_limit.hpp"
#include "engine/limits/token_allowance.hpp"
#include "proto/id_set.hpp"
#include "proto/retry_policy.hpp"
#include "proto/target_policy.hpp"
#include "storage/queue_shape.hpp"

namespace surge::engine {

using namespace std::chrono_literals;

// Name lookups for partner hosts (engine/net/dns_resolver.hpp): each shard asks c-ares, which
// runs every lookup at once on the shard's own thread, and keeps answers in a cache
// (engine/net/dns_cache.hpp).
struct dns_config {
  // Name servers to ask, "IP[:PORT]" separated by commas; empty: those of /etc/resolv.conf.
  // /etc/hosts is read first either way.
  std::string servers;
  // One query's wait for an answer before it is sent again, doubling on each of `tries`; a
  // lookup whose name server never answers ends after about 2 s + 4 s by default. A connect
  // stops waiting for it at its own deadline anyway (connect_timeout).
  std::chrono::milliseconds try_timeout = 2s;
  int tries = 2;
  // An answer is kept for its TTL, held within these bounds: at least a second so that a
  // zero TTL does not mean a lookup per connection, and at most five minutes.
  std::chrono::seconds min_ttl = 1s;
  std::chrono::seconds max_ttl = 300s;
  // A failed lookup (NXDOMAIN, no address, no answer) is kept this long: the rows behind the
  // name fail at once meanwhile instead of each asking again.
  std::chrono::milliseconds failure_ttl = 5s;
  // Host names each shard keeps answers for; past it, the answers expiring soonest go.
  std::size_t max_hosts = 4096;

  friend bool operator==(const dns_config&, const dns_config&) = default;
};

// An HTTP proxy partner connections leave through, with CONNECT (engine/net/proxy_tunnel.hpp).
// Given by the operator, so its own address is not held to the target policy; the partner's
// addresses are.
using egress_proxy = proto::proxy_address;

struct http_client_config {
  // TCP connect (and each address tried); through a proxy, reaching it and its CONNECT answer.
  std::chrono::milliseconds connect_timeout = 4s;
  std::chrono::milliseconds attempt_timeout = 8s;  // resolve + connect + TLS + request + response
  // Idle keep-alive connections are closed before common server idle timeouts (Node.js and
  // Apache close after 5 s) so that a reused connection is rarely already half-closed.
  std::chrono::milliseconds idle_timeout = 4s;
  // A connection idle this long gives its read buffer back (thousands of connections to slow
  // partners wait far more than they read); sooner, a busy one would free and allocate it for
  // every request.
  std::chrono::milliseconds idle_buffer_release = 1s;
  // Partner connections open at once, idle ones included, whole process (split evenly across
  // shards); 0: no ceiling. A new connection past it first closes the one idle longest. Each
  // is a file descriptor: the drain sets this from the process's limit (tools/file_limit.hpp).
  std::size_t max_connections = 0;
  std::size_t max_response_body = 4096;  // kept only for diagnostics
  std::size_t max_response_header = 16 * 1024;
  bool allow_private_targets = false;
  // Non-public addresses allowed all the same (--allow-targets): a partner on a VPN's 10.8/16
  // without opening loopback or cloud metadata.
  std::vector<proto::address_range> allowed_target_ranges;
  std::optional<std::string> ca_file;  // instead of the system trust store
  // TLS sessions each shard keeps for resumption, over all origins (engine/net/tls_sessions.hpp):
  // as many new connections can start at once and all resume.
  std::size_t tls_sessions = 4096;
  // An origin whose first full handshake brought no session by the end of its first exchange
  // (tickets off) is not waited for by its other new connections for this long
  // (engine/net/handshake_gate.hpp).
  std::chrono::milliseconds tls_no_session_hold = 60s;
  std::string user_agent = "Surge/0.1 (+webhook spike drainer)";
  dns_config dns;
  std::optional<egress_proxy> proxy;  // none: partners are connected to directly

  friend bool operator==(const http_client_config&, const http_client_config&) = default;
};

struct scheduler_config {
  int per_subscriber_in_flight = 16;  // when the subscriber's max_in_flight column is 0
  int max_in_flight = 4096;           // whole process; split evenly across shards
  // Claims ask for the rows a subscriber can send within this horizon, so a claimed row waits
  // for a token at most this long (far below the lease).
  std::chrono::milliseconds claim_horizon = 500ms;
  // Buffered rows per subscriber are capped at this many times its in-flight cap.
  int buffer_per_slot = 2;
  std::chrono::milliseconds demand_interval = 5ms;
  // The shard wakes for its timers on this grid: what falls due within one step is done in one
  // wake, at most a step late. Paced partners' tokens come due thousands of times a second at
  // scattered moments, and each wake costs the reactor two timer re-arms and a context switch.
  // Sending later than a token allows never breaks a limit, and costs no rate to a subscriber
  // whose buckets keep filling meanwhile: its burst holds the token and a step's refill besides
  // (a burst of 1, or a rate above (burst - 1) per step, is woken exactly). 0: every wake at its
  // exact time.
  std::chrono::microseconds wake_grid = 1ms;
  // A subscriber whose last claim came back short is polled again after this (doubling). The
  // cap bounds how late a row that falls due for an idle subscriber is seen (bench scenario d:
  // 2 s gave a p99 lag of 2 s); an empty poll is one index probe, ~5 us on the storage thread.
  std::chrono::milliseconds idle_poll_min = 100ms;
  std::chrono::milliseconds idle_poll_max = 500ms;
  std::chrono::milliseconds outcome_flush_interval = 5ms;
  std::size_t outcome_flush_rows = 256;
  std::size_t max_payload_bytes = 1024 * 1024;
  // Payload bytes the drain holds at once (claimed rows buffered and in flight, split evenly
  // across shards): claims ask for no more rows than fit. Each request in flight holds a copy
  // of its payload too, so the drain's memory for payloads stays under about twice this.
  std::int64_t max_payload_memory = std::int64_t{256} * 1024 * 1024;
  // A pause (Retry-After) longer than this gives buffered rows back to the queue instead of
  // holding their leases.
  std::chrono::milliseconds pause_release_threshold = 5s;
  // A subscriber whose URL resolves only to addresses the target policy refuses is held this
  // long, its rows queued and unspent, before its URL is tried again (DNS may move back).
  std::chrono::milliseconds refused_target_hold = 60s;
  // A row whose connection found no file descriptor free goes back to the queue for this long,
  // with no attempt counted and nothing charged to its partner's circuit: long enough that the
  // rows waiting for descriptors do not spin the shard, short enough to go as soon as some free.
  std::chrono::milliseconds out_of_descriptors_wait = 1s;
  // A coalescing subscriber claims up to this many rows ahead (no more than it can send within
  // coalesce_lookahead), so that repeats of a key are in its queue together and merge.
  int coalesce_lookahead_rows = 256;
  std::chrono::milliseconds coalesce_lookahead = 20s;
  circuit_config circuit;
  adaptive_rate_config adaptive;
  origin_limit_config origin;  // adaptive concurrency per host:port, per shard
  // Adaptive concurrency per shard over all of its origins, within its share of max_in_flight;
  // on whenever the origins' limits are (origin.latency_tolerance > 0).
  shard_limit_config shard;
  // Tokens leased from each subscriber's persisted bucket, shared with every other drainer.
  token_lease_config token_lease;

  friend bool operator==(const scheduler_config&, const scheduler_config&) = default;
};

// When the storage thread commits the outcomes it holds (engine/storage_thread/commit_timing.hpp
// says why these numbers).
struct commit_timing {
  // Outcomes are committed at least this often...
  std::chrono::steady_clock::duration interval = std::chrono::milliseconds(100);
  // ... or as soon as this many wait.
  std::size_t rows = 1000;

  friend bool operator==(const commit_timing&, const commit_timing&) = default;
};

struct storage_worker_config {
  std::string db_path;
  // The queue shape the operator named (--queue-shape); nullopt: whichever the database holds.
  // run_drain sets it to the shape it found, so every connection of the drain uses that one.
  std::optional<storage::queue_shape> shape;
  std::chrono::milliseconds busy_timeout = 5s;
  std::chrono::milliseconds lease = 60s;
  // A locked_until further ahead than now + max(lease, 30 s) + this is no lease anyone holds
  // (text, a unit mix-up, a typo): the row is dead-lettered rather than wait for ever.
  std::chrono::milliseconds max_lease_overrun = std::chrono::hours(1);
  // Outcomes are committed every 100 ms or 1,000 rows, claims at once
  // (engine/storage_thread/commit_timing.hpp).
  commit_timing outcome_commits;
  // The storage loop's longest sleep: it looks for rows other programs queued and for outcomes
  // due to be committed at least this often, with nothing else waking it.
  std::chrono::milliseconds wake_interval = 5ms;
  std::chrono::milliseconds subscriber_reload_interval = 3s;
  std::chrono::milliseconds drained_check_interval = 250ms;  // once the backlog is small
  // With --until-drained, once the shards are idle, the backlog is estimated empty and the end
  // may be near (engine/storage_thread/backlog_watch.hpp): the two quiet checks that end the
  // drain come this soon, not a drained-check interval apart.
  std::chrono::milliseconds end_in_sight_check_interval = 25ms;
  // The first backlog count waits for the shards' first claims to be answered, or this long
  // when none is asked (engine/storage_thread/backlog_watch.hpp, first_count_due).
  std::chrono::milliseconds first_count_wait = 100ms;
  // While it is large; in between, the last count less the rows finished since stands for it
  // (engine/storage_thread/backlog_watch.hpp, backlog_estimate).
  std::chrono::milliseconds backlog_refresh_interval = 10s;
  std::chrono::milliseconds error_backoff = 500ms;  // after a failed claim or write
  // How often the storage loop asks whether another connection committed (PRAGMA
  // data_version, about a microsecond) and, if so, which subscribers got new due rows: those
  // are woken at once instead of at their next idle poll. 0 turns the wake off (polls only).
  std::chrono::milliseconds new_rows_check_interval = 2ms;
  // The storage connection's page cache: the due indexes' hot pages and the table pages of the
  // rows in flight stay cached through a drain (SQLite's default is 2 MiB).
  int cache_kib = 16 * 1024;
  // A WAL this long is checkpointed (PASSIVE) by a thread and connection of its own, never by a
  // commit of the storage thread (SQLite's autocheckpoint would run it inside our commit).
  // 16,000 frames (64 MiB of 4 KiB pages) rather than SQLite's 1,000: a drain rewrites the same
  // index pages, attempt-table tail and row pages commit after commit, and a checkpoint copies
  // each page once however many frames hold it, so longer intervals copy far fewer pages and
  // pay the two fdatasync calls less often (the checkpointer's CPU per delivery is about 1.2 us
  // here against 2.8 at 1,000 frames; the WAL still starts over about once a second).
  int checkpoint_frames = 16000;
  // Refill ahead that a token lease may take as well (a debt the bucket pays off): about one
  // storage round trip, so that a subscriber with a burst of 1 loses no refill while its next
  // ask is on the way.
  std::chrono::milliseconds token_reserve = 50ms;
  // Ownership leases (several drainers on one queue): the heartbeat is renewed this often, and
  // each renewal keeps this drain's subscribers its own for `ownership_heartbeat`. A drain that
  // dies is taken over within about ownership_heartbeat + ownership_renew.
  std::chrono::milliseconds ownership_renew = 1s;
  std::chrono::milliseconds ownership_heartbeat = 4s;
  // While subscribers assigned to this drain wait for their owner to release them (a drain
  // joined or left), it renews this often instead, so a handoff leaves a subscriber without a
  // sender for about this long rather than up to a whole renewal interval.
  std::chrono::milliseconds ownership_handoff_poll = 100ms;
  // After the grace period, how long the last outcome writes may still wait for the database.
  std::chrono::milliseconds final_write_window = 1s;

  friend bool operator==(const storage_worker_config&, const storage_worker_config&) = default;
};

struct drain_config {
  int threads = 0;  // 0: one shard per core
  proto::id_set subscribers;
  bool until_drained = false;
  // With until_drained: also wait for retries scheduled within this long (0: do not wait).
  std::chrono::milliseconds until_drained_retry_wait{0};
  std::optional<std::chrono::milliseconds> duration;
  std::chrono::milliseconds shutdown_grace = 10s;  // in-flight attempts may finish within this
  std::chrono::milliseconds progress_interval = 5s;
  bool progress = true;
  enum class status_line { automatic, on, off } status = status_line::automatic;
  std::optional<std::string> metrics_listen;  // HOST:PORT for /metrics and /healthz
  std::size_t metrics_top_subscribers = 50;
  proto::retry_config retry;
  // Which fields of `retry` an operator set (--max-attempts, --max-age, --retry-base,
  // --retry-cap); the others follow the queue's shape (storage::retry_defaults), so that a row
  // of seed001 fares the same whichever drainer sends it.
  struct retry_settings_given {
    bool max_attempts = false, max_age = false, base_delay = false, max_delay = false;
    friend bool operator==(const retry_settings_given&, const retry_settings_given&) = default;
  } retry_given;
  std::chrono::seconds retry_after_cap = std::chrono::hours(1);
  http_client_config http;
  scheduler_config scheduler;
  storage_worker_config storage;

  friend bool operator==(const drain_config&, const drain_config&) = default;
};

}  // namespace surge::engine
