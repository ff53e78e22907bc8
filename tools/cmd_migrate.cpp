// surge migrate: create or upgrade the queue schema.
#include <iostream>

#include "storage/connection.hpp"
#include "storage/database.hpp"
#include "storage/schema.hpp"
#include "tools/commands.hpp"

namespace surge::tools {

void add_migrate_command(CLI::App& app, command_action& action) {
  auto* cmd = app.add_subcommand(
      "migrate", "Create the queue tables if absent and apply Surge's additive migrations.");
  auto db_path = std::make_shared<std::string>();
  auto shape = std::make_shared<std::string>();
  cmd->add_option("--db", *db_path,
                  "Queue: a SQLite file (created if missing) or a postgresql:// URI")
      ->required();
  add_queue_shape_option(cmd, *shape);
  cmd->callback([&action, db_path, shape] {
    action = [db_path, shape] {
      storage::connection db({.location = *db_path, .shape = named_shape(*shape)});
      // The one command that may create a queue: seed000's tables in an empty database. On a
      // seed001 queue only Surge's own tables are added.
      const auto report = storage::migrate_reporting(db, true);
      if (report.changed()) {
        std::cout << "migrate: " << report.describe() << " to "
                  << storage::printable_location(*db_path) << "\n";
      }
      std::cout << "schema version " << report.version
                << (report.version == report.version_before && !report.changed()
                        ? " (already current)"
                        : "")
                << "\n";
      return exit_ok;
    };
  });
}

}  // namespace surge::tools
