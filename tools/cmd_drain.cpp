// surge drain: empty the backlog as fast as every subscriber's limit allows.
#include <algorithm>
#include <iostream>
#include <string>

#include "engine/drain.hpp"
#include "engine/observe/log.hpp"
#include "storage/schema.hpp"
#include "storage/subscribers.hpp"
#include "tools/commands.hpp"
#include "tools/config_file.hpp"
#include "tools/drain_options.hpp"
#include "tools/file_limit.hpp"

namespace surge::tools {
namespace {

// --subscribers that names ids the queue does not have is a typo, not an empty spike: reported
// drained at once, it would hide every row of the subscribers meant. Each id or range listed must
// match a subscriber (exit 2 names the ones that do not).
void require_chosen_subscribers(const engine::drain_config& config) {
  if (config.subscribers.all()) return;
  storage::connection db({.location = config.storage.db_path,
                          .busy_timeout = config.storage.busy_timeout,
                          .create_if_missing = false,
                          .shape = config.storage.shape});
  storage::migrate(db);  // additive, and the drain runs it first anyway
  const auto found = storage::load_subscribers(db, config.subscribers);
  std::string unknown;
  for (const auto& [first, last] : config.subscribers.ranges()) {
    const bool any = std::any_of(found.begin(), found.end(), [&](const auto& row) {
      return row.id >= first && row.id <= last;
    });
    if (any) continue;
    unknown += unknown.empty() ? "" : ",";
    unknown +=
        first == last ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(last);
  }
  if (!unknown.empty()) {
    throw usage_error("--subscribers names no subscriber of this queue: " + unknown +
                      " (`surge subscriber list` shows the ids)");
  }
}

}  // namespace

void add_drain_command(CLI::App& app, command_action& action) {
  auto* cmd = app.add_subcommand(
      "drain",
      "Deliver due rows from the queue within every subscriber's rate limit until stopped.\n"
      "Exit codes: 0 stopped cleanly (signal, --duration, --until-drained); 1 start-up or "
      "database failure, including a queue file deleted or replaced while draining and outcomes "
      "the database had not taken when the grace period ended (those rows are sent again once "
      "their leases expire); 2 bad flags, including --subscribers naming no subscriber; 3 a "
      "second signal cut the shutdown short; 5 --until-drained sent everything it could, but "
      "rows of subscribers that cannot send now stay queued (paused, circuit open, held, "
      "inactive: the summary's held: lines name them), or rows whose outcome the database "
      "refused were quarantined (quarantined: lines).");
  auto opts = std::make_shared<drain_cli_options>();
  add_drain_options(cmd, *opts);
  add_config_option(cmd);
  cmd->callback([&action, opts] {
    action = [opts] {
      auto config = to_drain_config(*opts);
      if (const auto lowered = fit_connections_to_file_limit(config, engine::shard_count(config),
                                                             opts->max_in_flight_given);
          !lowered.empty()) {
        engine::log_warn(lowered);
      }
      require_chosen_subscribers(config);
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
      // Drained of everything that could be sent, but rows of subscribers that cannot send now
      // (held: lines above the summary; inactive or rate 0) are still queued.
      if (!summary.quarantined.empty()) {
        std::cerr << "surge: the database refused the outcomes of " << summary.quarantined.size()
                  << " rows (the quarantined: lines name them); each was sent once and is "
                     "still queued as it was\n";
        return exit_held;
      }
      if (summary.drained && summary.remaining > 0) {
        std::cerr << "surge: drained except " << summary.remaining
                  << " rows of subscribers that cannot send now (the held: lines say why)\n";
        return exit_held;
      }
      return exit_ok;
    };
  });
}

}  // namespace surge::tools
