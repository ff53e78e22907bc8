#pragma once
// The flags of `surge drain` (also used by `surge demo`) and their translation to the engine
// configuration.
#include <chrono>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/config.hpp"
#include "engine/drain.hpp"

namespace surge::tools {

struct drain_cli_options {
  std::string db_path;
  std::string queue_shape;  // --queue-shape; empty: whichever the queue holds
  int threads = 0;
  std::string subscribers;
  bool subscribers_given = false;  // so that an empty --subscribers is an error, not "all"
  bool until_drained = false;
  double until_drained_wait = 0;
  double duration = 0;
  int max_in_flight = 4096;
  int per_subscriber_in_flight = 16;
  double lease = 60;
  int max_attempts = 8;
  double max_age = 24 * 3600;
  double retry_base = 1;
  double retry_cap = 3600;
  engine::drain_config::retry_settings_given retry_given;
  double retry_after_cap = 3600;
  bool allow_private_targets = false;
  std::string ca_file;
  std::size_t max_payload_bytes = 1024 * 1024;
  std::int64_t max_payload_memory_mib =  // the engine's default
      engine::scheduler_config{}.max_payload_memory / (1024 * 1024);
  int circuit_failures = 10;
  double circuit_max_cooldown = 60;
  // On by default: attempts far past the origin's latency stop counting against it, so requests
  // hanging at one subscriber's path do not stall the others, and every subscriber may keep one
  // request in flight whatever the limit (engine/scheduling), so a paced one keeps its rate.
  double origin_latency_tolerance = 2;
  double origin_latency_slack =  // seconds; the engine's default
      std::chrono::duration<double>(engine::origin_limit_config{}.latency_slack).count();
  // Seconds between polls of a subscriber whose last claim came back short (doubling).
  double idle_poll_min = 0.1;
  double token_lease = 1.0;
  double idle_poll_max = 0.5;
  double new_rows_check_interval = 0.002;
  double connect_timeout = 4;
  double attempt_timeout = 8;
  double shutdown_grace = 10;
  double progress_interval = 5;
  std::string log_level = "info";
  std::string log_format = "text";
  std::string progress = "auto";
  std::string metrics_listen;
  std::size_t metrics_subscribers = 50;
};

void add_drain_options(CLI::App* cmd, drain_cli_options& options);
// Throws usage_error for values CLI11 cannot check alone.
engine::drain_config to_drain_config(const drain_cli_options& options);

// The one-line exit summary on stdout.
void print_drain_summary(const engine::drain_summary& summary);

}  // namespace surge::tools
