#pragma once
// `surge drain`: wires the shards and the storage thread together and runs until stopped,
// drained, or out of time; SIGINT/SIGTERM/SIGHUP stop it gracefully.
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/config.hpp"
#include "engine/observe/metrics.hpp"

namespace surge::engine {

struct drain_summary {
  std::int64_t delivered = 0;
  std::int64_t retried = 0;
  std::int64_t dead = 0;
  std::int64_t released = 0;
  std::int64_t coalesced = 0;  // done without a request: a newer row went in their place
  std::int64_t lost_leases = 0;
  std::int64_t attempts = 0;
  std::int64_t storage_errors = 0;
  std::int64_t tls_full_handshakes = 0;
  std::int64_t tls_resumed_handshakes = 0;
  // Rows still due or leased at exit: those of paused subscribers or behind an open circuit
  // under --until-drained, or whatever a --duration or signal stop left (-1 unknown).
  std::int64_t remaining = -1;
  std::chrono::duration<double> elapsed{0};
  bool drained = false;  // --until-drained reached an empty queue
  // Outcomes the database had not taken when the stop's deadline passed; their rows are sent
  // again once their leases expire.
  std::int64_t unwritten = 0;
  // Why the drain had to stop on its own (the queue file deleted or replaced); empty if not.
  std::string failure;
  // Subscribers that could not send when the drain ended, and why (by id).
  std::vector<held_subscriber> held;
  // Rows whose outcome the database refused even as a dead-letter, by id with its reason: this
  // drain sent each once and claimed it no more.
  std::map<std::int64_t, std::string> quarantined;
  // The partners whose rows are still queued at exit, with their state and why (the partner
  // view of the last snapshots and a fresh count of the queue).
  std::vector<partner_row> left;
};

// Runs the drain on the calling thread (which handles signals and progress). Throws at
// start-up for a bad database or TLS setup; afterwards failures are counted and logged.
drain_summary run_drain(const drain_config& config);

// The shards a drain of `config` runs: --threads, or one per core when it is 0.
int shard_count(const drain_config& config);

}  // namespace surge::engine
