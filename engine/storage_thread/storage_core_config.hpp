#pragma once
// The storage core's settings (engine/storage_thread/storage_core.hpp), with every interval it
// and its machines keep named.
#include <chrono>
#include <cstdint>

#include "engine/config.hpp"

namespace surge::engine {

struct storage_core_config {
  storage_worker_config storage;
  std::int64_t max_payload_bytes = INT64_MAX;  // rows with larger payloads are not claimed
  bool until_drained = false;
  std::chrono::milliseconds until_drained_retry_wait{0};
  // Announced quotas are for an operator's eyes: once a second is fresh enough, and costs one
  // short transaction however many partners announce.
  std::chrono::milliseconds quota_write_interval = std::chrono::seconds(1);
  // /healthz reports the database reachable only if something succeeded lately: with no claims
  // or writes to make, a trivial read this often proves it (and the queue file is looked for).
  std::chrono::milliseconds ping_interval = std::chrono::seconds(1);
  // Rows of unknown subscribers and rows no claim can match: finding them reads every
  // outstanding row, so it is done seldom (see backlog_watch).
  std::chrono::milliseconds stuck_row_sweep_interval = std::chrono::seconds(30);
  // How often a lasting condition (rows or subscribers locked by another session) is repeated.
  std::chrono::milliseconds repeated_warning_interval = std::chrono::seconds(30);

  static storage_core_config of(const drain_config& drain);
};

}  // namespace surge::engine
