// surge drain: empty the backlog as fast as every subscriber's limit allows.
#include <iostream>

#include "engine/drain.hpp"
#include "engine/observe/log.hpp"
#include "tools/commands.hpp"
#include "tools/config_file.hpp"
#include "tools/drain_options.hpp"

namespace surge::tools {

void add_drain_command(CLI::App& app, command_action& action) {
  auto* cmd = app.add_subcommand(
      "drain",
      "Deliver due rows from the queue within every subscriber's rate limit until stopped.\n"
      "Exit codes: 0 stopped cleanly (signal, --duration, --until-drained); 1 start-up or "
      "database failure, including a queue file deleted or replaced while draining and outcomes "
      "the database had not taken when the grace period ended (those rows are sent again once "
      "their leases expire); 2 bad flags; 3 a second signal cut the shutdown short.");
  auto opts = std::make_shared<drain_cli_options>();
  add_drain_options(cmd, *opts);
  add_config_option(cmd);
  cmd->callback([&action, opts] {
    action = [opts] {
      const auto config = to_drain_config(*opts);
      const auto summary = engine::run_drain(config);
      print_drain_summary(summary);
      if (!summary.failure.empty()) {
        std::cerr << "surge: " << summary.failure << "\n";
        return exit_failure;
      }
      if (summary.unwritten > 0) {
        std::cerr << "surge: the database did not take the outcomes of " << summary.unwritten
                  << " rows before the grace period ended; they are sent again once their "
                     "leases expire\n";
        return exit_failure;
      }
      return exit_ok;
    };
  });
}

}  // namespace surge::tools
