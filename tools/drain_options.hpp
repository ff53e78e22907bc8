#pragma once
// The flags of `surge drain` (also used by `surge demo`) and their translation to the engine
// configuration.
#include <chrono>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/config.hpp"
#include "engine/drain.hpp"

namespace surge::tools {

namespace detail {
// The engine's defaults are the flags' defaults: engine/config.hpp is their one home.
inline const engine::drain_config drain_defaults{};
template <class Rep, class Period>
constexpr double seconds(std::chrono::duration<Rep, Period> d) {
  return std::chrono::duration<double>(d).count();
}
}  // namespace detail

// Each flag's value, in the unit the flag is given in (seconds, MiB), defaulting to the engine's.
struct drain_cli_options {
  std::string db_path;
  std::string queue_shape;  // --queue-shape; empty: whichever the queue holds
  int threads = detail::drain_defaults.threads;
  std::string subscribers;
  bool subscribers_given = false;  // so that an empty --subscribers is an error, not "all"
  bool until_drained = detail::drain_defaults.until_drained;
  double until_drained_wait = detail::seconds(detail::drain_defaults.until_drained_retry_wait);
  double duration = 0;  // 0: no limit
  int max_in_flight = detail::drain_defaults.scheduler.max_in_flight;
  bool max_in_flight_given = false;  // so that one the file limit cannot fit is an error
  int per_subscriber_in_flight = detail::drain_defaults.scheduler.per_subscriber_in_flight;
  double lease = detail::seconds(detail::drain_defaults.storage.lease);
  int max_attempts = detail::drain_defaults.retry.max_attempts;
  double max_age = detail::seconds(detail::drain_defaults.retry.max_age);
  double retry_base = detail::seconds(detail::drain_defaults.retry.base_delay);
  double retry_cap = detail::seconds(detail::drain_defaults.retry.max_delay);
  engine::drain_config::retry_settings_given retry_given;
  double retry_after_cap = detail::seconds(detail::drain_defaults.retry_after_cap);
  bool allow_private_targets = detail::drain_defaults.http.allow_private_targets;
  std::string ca_file;
  std::string dns_servers;      // --dns-server
  std::string allowed_targets;  // --allow-targets
  std::string proxy;            // --proxy
  std::size_t max_payload_bytes = detail::drain_defaults.scheduler.max_payload_bytes;
  std::int64_t max_payload_memory_mib =
      detail::drain_defaults.scheduler.max_payload_memory / (1024 * 1024);
  int circuit_failures = detail::drain_defaults.scheduler.circuit.failure_threshold;
  double circuit_max_cooldown =
      detail::seconds(detail::drain_defaults.scheduler.circuit.max_cooldown);
  double origin_latency_tolerance = detail::drain_defaults.scheduler.origin.latency_tolerance;
  double origin_latency_slack =
      detail::seconds(detail::drain_defaults.scheduler.origin.latency_slack);
  double idle_poll_min = detail::seconds(detail::drain_defaults.scheduler.idle_poll_min);
  double token_lease = detail::drain_defaults.scheduler.token_lease.lease_seconds;
  double idle_poll_max = detail::seconds(detail::drain_defaults.scheduler.idle_poll_max);
  double new_rows_check_interval =
      detail::seconds(detail::drain_defaults.storage.new_rows_check_interval);
  double connect_timeout = detail::seconds(detail::drain_defaults.http.connect_timeout);
  double attempt_timeout = detail::seconds(detail::drain_defaults.http.attempt_timeout);
  double shutdown_grace = detail::seconds(detail::drain_defaults.shutdown_grace);
  double progress_interval = detail::seconds(detail::drain_defaults.progress_interval);
  std::string log_level = "info";
  std::string log_format = "text";
  std::string progress = "auto";
  std::string metrics_listen;
  std::size_t metrics_subscribers = detail::drain_defaults.metrics_top_subscribers;
};

void add_drain_options(CLI::App* cmd, drain_cli_options& options);
// Throws usage_error for values CLI11 cannot check alone.
engine::drain_config to_drain_config(const drain_cli_options& options);

// The one-line exit summary on stdout.
void print_drain_summary(const engine::drain_summary& summary);

}  // namespace surge::tools
