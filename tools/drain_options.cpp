#include "tools/drain_options.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include "engine/observe/log.hpp"
#include "engine/observe/metrics_server.hpp"
#include "proto/id_set.hpp"
#include "proto/target_policy.hpp"
#include "tools/commands.hpp"
#include "tools/number_check.hpp"
#include "tools/time_arg.hpp"

namespace surge::tools {

namespace {
// Ten years: longer than any drain or retry window, and far from overflowing milliseconds.
constexpr double max_seconds = 10 * 365 * 86400.0;

// "IP", "IP:PORT" or "[IPv6]:PORT", comma-separated: what c-ares takes as its server list.
CLI::Validator name_server_list() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        std::size_t start = 0;
        while (start <= value.size()) {
          const auto comma = value.find(',', start);
          const auto item =
              value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
          std::string host = item;
          std::string port;
          if (!item.empty() && item.front() == '[') {
            const auto close = item.find(']');
            if (close == std::string::npos) return "\"" + item + "\": missing ]";
            host = item.substr(1, close - 1);
            if (close + 1 < item.size()) {
              if (item[close + 1] != ':') return "\"" + item + "\": expected :PORT after ]";
              port = item.substr(close + 2);
            }
          } else if (const auto colon = item.find(':'); colon != std::string::npos) {
            if (item.find(':', colon + 1) != std::string::npos) {
              return "\"" + item + "\": write an IPv6 server as [ADDRESS]:PORT";
            }
            host = item.substr(0, colon);
            port = item.substr(colon + 1);
          }
          if (!proto::ip_address::parse(host)) {
            return "\"" + item + "\": not an IP address (a name server is given by address)";
          }
          if (!port.empty() || (item.find(':') != std::string::npos && item.front() != '[')) {
            const bool digits = !port.empty() && port.size() <= 5 &&
                                port.find_first_not_of("0123456789") == std::string::npos;
            if (!digits || std::stoi(port) < 1 || std::stoi(port) > 65535) {
              return "\"" + item + "\": port must be 1-65535";
            }
          }
          if (comma == std::string::npos) break;
          start = comma + 1;
        }
        return {};
      },
      "IP[:PORT],...");
}

// An id list as proto::id_set reads it ("1,4,10-20"), checked while parsing, so that a bad list
// in a --config file is named with its line.
CLI::Validator id_list() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        // An empty list is a mistake (an unset shell variable, say), not "all subscribers".
        if (value.empty()) return "empty list";
        std::string error;
        if (!proto::id_set::parse(value, &error)) return error;
        return {};
      },
      "IDS");
}

// Rounded, so that a default given back in seconds comes back as the same milliseconds.
std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(std::llround(seconds * 1000.0));
}
}  // namespace

void add_drain_options(CLI::App* cmd, drain_cli_options& o) {
  cmd->add_option("--db", o.db_path, "Queue: a SQLite file or a postgresql:// URI")
      ->required()
      ->check(existing_queue());
  add_queue_shape_option(cmd, o.queue_shape);
  cmd->add_option("--threads", o.threads, "Reactor threads (shards); default: one per core")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--subscribers,--subscriber", o.subscribers,
                  "Only these subscriber ids, e.g. 1,4,10-20 (default: all); --subscriber is "
                  "the same flag")
      ->check(id_list())
      ->each([&o](const std::string&) { o.subscribers_given = true; });
  cmd->add_flag("--until-drained", o.until_drained,
                "Exit once nothing is due, leased or in flight");
  cmd->add_option("--until-drained-wait", o.until_drained_wait,
                  "With --until-drained, also wait for retries scheduled within this many "
                  "seconds")
      ->capture_default_str()
      ->transform(duration_in(0.0, 86400.0));
  cmd->add_option("--duration", o.duration, "Stop after this many seconds")
      ->transform(duration_in(0.001, max_seconds));
  cmd->add_option("--max-in-flight", o.max_in_flight,
                  "Requests in flight, whole process (held lower when the file limit cannot "
                  "fit the default)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000))
      ->each([&o](const std::string&) { o.max_in_flight_given = true; });
  cmd->add_option("--per-subscriber-in-flight", o.per_subscriber_in_flight,
                  "Requests in flight per subscriber whose max_in_flight column is 0")
      ->capture_default_str()
      ->check(CLI::Range(1, 100'000));
  cmd->add_option("--lease", o.lease, "Seconds a claimed row stays leased to this process")
      ->capture_default_str()
      ->transform(duration_in(5.0, 86400.0));
  // Unset, these follow the queue's shape (storage::retry_defaults).
  cmd->add_option("--max-attempts", o.max_attempts,
                  "Attempts before a row is dead (default 8; 12 on a seed001 queue)")
      ->check(CLI::Range(1, 1000))
      ->each([&o](const std::string&) { o.retry_given.max_attempts = true; });
  cmd->add_option("--max-age", o.max_age,
                  "Seconds after creation a row is no longer retried (default 86400)")
      ->transform(duration_in(1.0, max_seconds))
      ->each([&o](const std::string&) { o.retry_given.max_age = true; });
  cmd->add_option("--retry-base", o.retry_base,
                  "First retry delay in seconds, doubling (default 1; on a seed001 queue "
                  "2^attempt s plus 0-30 s)")
      ->transform(duration_in(0.01, 86400.0))
      ->each([&o](const std::string&) { o.retry_given.base_delay = true; });
  cmd->add_option("--retry-cap", o.retry_cap, "Longest retry delay in seconds (default 3600)")
      ->transform(duration_in(0.01, 7 * 86400.0))
      ->each([&o](const std::string&) { o.retry_given.max_delay = true; });
  cmd->add_option("--retry-after-cap", o.retry_after_cap,
                  "Longest Retry-After honoured, in seconds")
      ->capture_default_str()
      ->transform(duration_in(0.0, 7 * 86400.0));
  cmd->add_flag("--allow-private-targets", o.allow_private_targets,
                "Allow loopback and private addresses (tests and local benchmarks)");
  cmd->add_option("--allow-targets", o.allowed_targets,
                  "Non-public address ranges to allow all the same, CIDR[,CIDR...] (a partner "
                  "on a VPN: 10.8.0.0/16); narrower than --allow-private-targets");
  cmd->add_option("--dns-server", o.dns_servers,
                  "Name servers for partner hosts, IP[:PORT] or [IPv6]:PORT, comma-separated "
                  "(default: those of /etc/resolv.conf; /etc/hosts is read first either way)")
      ->check(name_server_list());
  cmd->add_option("--proxy", o.proxy,
                  "Leave through this HTTP proxy, http://HOST:PORT: every partner connection is "
                  "a CONNECT tunnel to an address of the partner that passed the target checks "
                  "(HTTPS_PROXY and the like are ignored)");
  cmd->add_option("--ca-file", o.ca_file, "PEM CA bundle instead of the system trust store")
      ->check(CLI::ExistingFile);
  cmd->add_option("--max-payload-bytes", o.max_payload_bytes,
                  "Rows with a larger payload are dead-lettered instead of sent")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 30));
  cmd->add_option("--max-payload-memory", o.max_payload_memory_mib,
                  "MiB of payloads the drain holds at once (claimed rows buffered and in "
                  "flight); claims take no more rows than fit, so memory stays bounded whatever "
                  "the rows carry")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  cmd->add_option("--circuit-failures", o.circuit_failures,
                  "Consecutive failures (5xx, no answer) that open a subscriber's circuit")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--circuit-max-cooldown", o.circuit_max_cooldown,
                  "Longest wait between probes of an open circuit, in seconds")
      ->capture_default_str()
      ->transform(duration_in(1.0, 3600.0));
  cmd->add_option("--origin-latency-tolerance", o.origin_latency_tolerance,
                  "Adaptive concurrency per host:port: requests in flight shrink once latency "
                  "exceeds this many times the best seen (plus --origin-latency-slack); 0 "
                  "turns it off")
      ->capture_default_str()
      ->check(finite_in(0.0, 100.0));
  cmd->add_option("--origin-latency-slack", o.origin_latency_slack,
                  "Seconds of latency over tolerance x the best seen that an origin may show "
                  "before its requests in flight shrink; sets the queue at a fast origin")
      ->capture_default_str()
      ->transform(duration_in(0.0, 10.0));
  cmd->add_option("--token-lease", o.token_lease,
                  "Seconds of refill taken from a subscriber's persisted bucket per lease; every "
                  "drainer of the subscriber spends from that one bucket")
      ->capture_default_str()
      ->transform(duration_in(0.01, 60.0));
  cmd->add_option("--idle-poll-min", o.idle_poll_min,
                  "Seconds before a subscriber whose claim came back short is asked again "
                  "(doubling up to --idle-poll-max)")
      ->capture_default_str()
      ->transform(duration_in(0.001, 86400.0));
  cmd->add_option("--idle-poll-max", o.idle_poll_max,
                  "Longest wait between polls of an idle subscriber, in seconds; rows other "
                  "programs queue wake it sooner (--new-rows-check-interval)")
      ->capture_default_str()
      ->transform(duration_in(0.001, 86400.0));
  cmd->add_option("--new-rows-check-interval", o.new_rows_check_interval,
                  "Seconds between checks for rows queued by other programs, whose "
                  "subscribers are then asked at once (0: only the idle polls find them)")
      ->capture_default_str()
      ->transform(duration_in(0.0, 60.0));
  cmd->add_option("--connect-timeout", o.connect_timeout, "Seconds to connect")
      ->capture_default_str()
      ->transform(duration_in(0.01, 600.0));
  cmd->add_option("--attempt-timeout", o.attempt_timeout, "Seconds for a whole attempt")
      ->capture_default_str()
      ->transform(duration_in(0.01, 3600.0));
  cmd->add_option("--grace", o.shutdown_grace,
                  "Seconds in-flight attempts may take to finish after a stop signal")
      ->capture_default_str()
      ->transform(duration_in(0.0, 3600.0));
  cmd->add_option("--progress-interval", o.progress_interval,
                  "Seconds between progress log lines (0: none)")
      ->capture_default_str()
      ->transform(duration_in(0.0, 3600.0));
  cmd->add_option("--log-level", o.log_level, "debug, info, warn or error")
      ->capture_default_str()
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
  cmd->add_option("--log-format", o.log_format, "text or json (one object per line)")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  cmd->add_option("--progress", o.progress,
                  "auto: a live status line on a terminal, else log lines every "
                  "--progress-interval; on: always the status line; off: neither")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "on", "off"}));
  cmd->add_option("--metrics-listen", o.metrics_listen,
                  "HOST:PORT for Prometheus /metrics and /healthz (port 0 picks one)");
  cmd->add_option("--metrics-subscribers", o.metrics_subscribers,
                  "Per-subscriber (and per-host) series for at most this many, the busiest first")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{0}, std::size_t{10000}));
}

engine::drain_config to_drain_config(const drain_cli_options& o) {
  engine::drain_config config;
  config.storage.db_path = o.db_path;
  config.storage.shape = named_shape(o.queue_shape);
  config.retry_given = o.retry_given;
  config.threads = o.threads;
  if (o.subscribers_given) {
    // An empty list is a mistake (an unset shell variable, say), not "all subscribers".
    if (o.subscribers.empty()) throw usage_error("bad --subscribers: empty list");
    std::string error;
    auto set = proto::id_set::parse(o.subscribers, &error);
    if (!set) throw usage_error("bad --subscribers: " + error);
    config.subscribers = *set;
  }
  config.until_drained = o.until_drained;
  config.until_drained_retry_wait = millis(o.until_drained_wait);
  if (o.duration > 0) config.duration = millis(o.duration);
  config.scheduler.max_in_flight = o.max_in_flight;
  config.scheduler.per_subscriber_in_flight = o.per_subscriber_in_flight;
  config.storage.lease = millis(o.lease);
  config.retry.max_attempts = o.max_attempts;
  config.retry.max_age = std::chrono::seconds(static_cast<std::int64_t>(o.max_age));
  config.retry.base_delay = millis(o.retry_base);
  config.retry.max_delay = millis(o.retry_cap);
  if (config.retry.max_delay < config.retry.base_delay) {
    throw usage_error("--retry-cap must not be below --retry-base");
  }
  config.retry_after_cap = std::chrono::seconds(static_cast<std::int64_t>(o.retry_after_cap));
  config.http.allow_private_targets = o.allow_private_targets;
  for (std::size_t start = 0; !o.allowed_targets.empty() && start <= o.allowed_targets.size();) {
    auto end = o.allowed_targets.find(',', start);
    if (end == std::string::npos) end = o.allowed_targets.size();
    const auto text = o.allowed_targets.substr(start, end - start);
    const auto range = proto::parse_address_range(text);
    if (!range) {
      throw usage_error("--allow-targets: '" + text +
                        "' is not an address range (ADDRESS/PREFIX, e.g. 10.8.0.0/16, with no "
                        "bits set past the prefix)");
    }
    config.http.allowed_target_ranges.push_back(*range);
    start = end + 1;
  }
  if (!o.ca_file.empty()) config.http.ca_file = o.ca_file;
  config.http.dns.servers = o.dns_servers;
  if (!o.proxy.empty()) {
    auto parsed = proto::parse_proxy_url(o.proxy);
    if (!parsed.value) {
      throw usage_error("--proxy: '" + proto::redact_url(o.proxy) + "' " + parsed.error);
    }
    config.http.proxy = std::move(*parsed.value);
  }
  config.scheduler.max_payload_bytes = o.max_payload_bytes;
  config.scheduler.max_payload_memory = o.max_payload_memory_mib * 1024 * 1024;
  config.scheduler.circuit.failure_threshold = o.circuit_failures;
  config.scheduler.circuit.max_cooldown = millis(o.circuit_max_cooldown);
  // Below 1 no latency is ever good enough and the limit would sit at its minimum.
  if (o.origin_latency_tolerance > 0 && o.origin_latency_tolerance < 1) {
    throw usage_error("--origin-latency-tolerance must be 0 (off) or at least 1");
  }
  config.scheduler.origin.latency_tolerance = o.origin_latency_tolerance;
  config.scheduler.origin.latency_slack =
      std::chrono::microseconds(std::llround(o.origin_latency_slack * 1e6));
  if (o.idle_poll_max < o.idle_poll_min) {
    throw usage_error("--idle-poll-max must not be below --idle-poll-min");
  }
  config.scheduler.idle_poll_min = millis(o.idle_poll_min);
  config.scheduler.token_lease.lease_seconds = o.token_lease;
  config.scheduler.idle_poll_max = millis(o.idle_poll_max);
  config.storage.new_rows_check_interval = millis(o.new_rows_check_interval);
  config.http.connect_timeout = millis(o.connect_timeout);
  config.http.attempt_timeout = millis(o.attempt_timeout);
  if (config.http.connect_timeout > config.http.attempt_timeout) {
    config.http.connect_timeout = config.http.attempt_timeout;
  }
  config.shutdown_grace = millis(o.shutdown_grace);
  config.progress = o.progress_interval > 0 && o.progress != "off";
  config.status = o.progress == "on"    ? engine::drain_config::status_line::on
                  : o.progress == "off" ? engine::drain_config::status_line::off
                                        : engine::drain_config::status_line::automatic;
  if (!o.metrics_listen.empty()) {
    try {
      engine::parse_listen_address(o.metrics_listen);
    } catch (const std::invalid_argument& error) {
      throw usage_error(std::string("bad --metrics-listen: ") + error.what());
    }
    config.metrics_listen = o.metrics_listen;
  }
  config.metrics_top_subscribers = o.metrics_subscribers;
  engine::set_log_format(o.log_format == "json" ? engine::log_format::json
                                                : engine::log_format::text);
  if (config.progress) config.progress_interval = millis(o.progress_interval);
  // Rows must be sent long before their lease runs out; a short lease with a long attempt
  // timeout would hand rows to the other drainer while we are still sending them.
  if (config.storage.lease < 2 * config.http.attempt_timeout + config.scheduler.claim_horizon) {
    throw usage_error("--lease must be at least twice --attempt-timeout plus one second");
  }
  const std::string& level = o.log_level;
  engine::set_log_level(level == "debug"   ? engine::log_level::debug
                        : level == "warn"  ? engine::log_level::warn
                        : level == "error" ? engine::log_level::error
                                           : engine::log_level::info);
  return config;
}

void print_drain_summary(const engine::drain_summary& s) {
  const double seconds = s.elapsed.count();
  // One line per subscriber that could not send, before the summary line (which stays last).
  for (const auto& held : s.held) {
    const std::string until =
        held.until_unix > 0 ? "until " + format_utc(held.until_unix) : "until an operator acts";
    std::printf("held: subscriber %lld: %s (%s)\n", static_cast<long long>(held.id),
                held.reason.c_str(), until.c_str());
  }
  // Whose rows are still queued, and why, so that remaining= below is never a bare number.
  for (const auto& left : s.left) {
    std::string why = engine::partner_state_name(left.state);
    if (!left.reason.empty()) why += ": " + left.reason;
    if (!left.last_error.empty()) why += "; last error: " + left.last_error.substr(0, 200);
    std::printf("left: subscriber %lld: %lld rows (%s)\n", static_cast<long long>(left.id),
                static_cast<long long>(left.queued), why.c_str());
  }
  for (const auto& [row, reason] : s.quarantined) {
    std::printf("quarantined: row %lld: %s\n", static_cast<long long>(row), reason.c_str());
  }
  // A count the database could not give at the stop is unknown, not a number.
  const std::string remaining = s.remaining < 0 ? "unknown" : std::to_string(s.remaining);
  std::printf(
      "summary: delivered=%lld retried=%lld dead=%lld released=%lld coalesced=%lld "
      "lost_leases=%lld attempts=%lld remaining=%s storage_errors=%lld unwritten=%lld "
      "tls_full=%lld tls_resumed=%lld duration=%.1fs rate=%.0f/s%s\n",
      static_cast<long long>(s.delivered), static_cast<long long>(s.retried),
      static_cast<long long>(s.dead), static_cast<long long>(s.released),
      static_cast<long long>(s.coalesced), static_cast<long long>(s.lost_leases),
      static_cast<long long>(s.attempts), remaining.c_str(),
      static_cast<long long>(s.storage_errors), static_cast<long long>(s.unwritten),
      static_cast<long long>(s.tls_full_handshakes),
      static_cast<long long>(s.tls_resumed_handshakes), seconds,
      seconds > 0 ? static_cast<double>(s.delivered) / seconds : 0.0,
      s.drained ? " (drained)" : "");
  std::fflush(stdout);
}

}  // namespace surge::tools
