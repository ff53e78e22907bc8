// surge: the webhook spike drainer and its tools.
#include <exception>
#include <iostream>
#include <string>

#include "storage/error.hpp"
#include "tools/commands.hpp"
#include "tools/config_file.hpp"
#include "tools/version.hpp"

int main(int argc, char** argv) {
  using namespace surge::tools;
  CLI::App app{
      "surge: drains webhook delivery spikes from a SQLite or PostgreSQL queue, within every "
      "subscriber's rate limit."};
  app.name("surge");
  app.require_subcommand(1, 1);
  app.set_version_flag("--version", std::string("surge ") + surge_version() + " (commit " +
                                        surge_commit() + ", " + surge_allocator() + ")");

  command_action action;
  add_migrate_command(app, action);
  add_emit_command(app, action);
  add_stats_command(app, action);
  add_subscriber_command(app, action);
  add_drain_command(app, action);
  add_sink_command(app, action);
  add_demo_command(app, action);
  add_dead_command(app, action);
  add_audit_command(app, action);
  add_prune_command(app, action);

  // CLI11 reports an unknown subcommand as "a subcommand is required"; name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    const std::string word = argv[1];
    const auto known = app.get_subcommands([&](CLI::App* sub) { return sub->get_name() == word; });
    if (known.empty()) {
      std::cerr << "surge: unknown command '" << word << "'\nRun with --help for the commands.\n";
      return exit_usage;
    }
  }
  try {
    parse_command_line(app, argc, argv);
  } catch (const CLI::ParseError& error) {
    const int printed = app.exit(error);
    return printed == 0 ? exit_ok : exit_usage;
  }
  try {
    return action ? action() : exit_usage;
  } catch (const usage_error& error) {
    std::cerr << "surge: " << error.what() << "\n";
    return exit_usage;
  } catch (const surge::storage::error& error) {
    // A queue of no shape Surge can use: the operator points --db elsewhere or names a shape.
    if (error.what_kind() == surge::storage::error::kind::bad_shape) {
      std::cerr << "surge: " << error.what() << "\n";
      return exit_usage;
    }
    std::cerr << "surge: database error: " << error.what() << "\n";
    return exit_failure;
  } catch (const std::exception& error) {
    std::cerr << "surge: " << error.what() << "\n";
    return exit_failure;
  }
}
