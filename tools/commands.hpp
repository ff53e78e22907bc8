#pragma once
// Each `surge` subcommand registers itself on the top-level CLI11 app and, when chosen, sets the
// function main() runs after parsing. Exit codes (docs/cli.md): 0 success, 1 runtime failure,
// 2 usage error (bad flag or value), 3 stopped by a second signal, 4 `audit` found a rate-limit
// violation, 5 `drain --until-drained` left rows of subscribers that cannot send now.
#include <functional>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "storage/connection.hpp"

namespace surge::tools {

using command_action = std::function<int()>;

inline constexpr int exit_ok = 0;
inline constexpr int exit_failure = 1;
inline constexpr int exit_usage = 2;
// 3 is returned by the drain itself (std::_Exit) on a second signal.
inline constexpr int exit_violation = 4;
// `drain --until-drained` sent all it could; rows of subscribers that cannot send now remain.
inline constexpr int exit_held = 5;

void add_migrate_command(CLI::App& app, command_action& action);
void add_emit_command(CLI::App& app, command_action& action);
void add_stats_command(CLI::App& app, command_action& action);
void add_subscriber_command(CLI::App& app, command_action& action);
void add_drain_command(CLI::App& app, command_action& action);
void add_sink_command(CLI::App& app, command_action& action);
void add_demo_command(CLI::App& app, command_action& action);
void add_dead_command(CLI::App& app, command_action& action);
void add_audit_command(CLI::App& app, command_action& action);
void add_prune_command(CLI::App& app, command_action& action);

// --db of a command that needs an existing queue: a file that exists, or a postgresql:// URI
// (whether that database exists is for the server to say).
inline CLI::Validator existing_queue() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (storage::is_postgres_location(value)) return {};
        return CLI::ExistingFile(value);
      },
      "QUEUE");
}

// --queue-shape: the published queue shape to use (storage/queue_shape.hpp), needed only when
// the database holds tables of both; the `queue-shape` key in a --config file sets it too.
inline void add_queue_shape_option(CLI::App* cmd, std::string& shape) {
  cmd->add_option("--queue-shape", shape,
                  "seed000 (webhook_subscriber/webhook_delivery) or seed001 "
                  "(webhook_subscribers/webhook_deliveries/webhook_buckets); default: the one "
                  "the queue holds")
      ->check(CLI::IsMember({"seed000", "seed001"}));
}
inline std::optional<storage::queue_shape> named_shape(const std::string& text) {
  if (text.empty()) return std::nullopt;
  return storage::parse_queue_shape(text);
}

// Thrown by an action for a bad value that parsing could not catch (exit code 2).
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace surge::tools
