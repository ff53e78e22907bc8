// surge prune: delete finished rows and their attempt records older than a cutoff, in short
// write transactions, then give the space back.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

#include <boost/json/value.hpp>

#include "proto/clock.hpp"
#include "storage/connection.hpp"
#include "storage/database.hpp"
#include "storage/retention.hpp"
#include "storage/schema.hpp"
#include "tools/commands.hpp"
#include "tools/json_text.hpp"
#include "tools/config_file.hpp"
#include "tools/time_arg.hpp"

namespace surge::tools {

namespace {

// A file's size, 0 when it is not there. The database file and its write-ahead log are reported
// apart: the log grows while prune deletes (its pages are copied back, not truncated), and the
// sum would show a file that did not change size as grown.
std::uintmax_t file_bytes(const std::string& path) {
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  return error ? 0 : size;
}

struct prune_cli {
  std::string db_path;
  std::string shape;
  std::string older_than;
  bool dead = false;
  int batch = 500;
  bool enable_incremental = false;
  bool json = false;
};

int run_prune(const prune_cli& o) {
  const auto age = parse_duration(o.older_than);
  if (!age || *age <= 0) {
    throw usage_error("bad --older-than '" + o.older_than +
                      "': give a positive duration, e.g. 14d, 12h, 90m, 2w or seconds");
  }
  storage::connection db(
      {.location = o.db_path, .create_if_missing = false, .shape = named_shape(o.shape)});
  // A queue of no shape Surge can use is refused as such (exit 2), before asking its version.
  db.shape();
  if (storage::schema_version(db) < 1) {
    std::cerr << "surge: " << o.db_path << " has not been migrated; run surge migrate first\n";
    return exit_failure;
  }
  const auto bytes_before = file_bytes(o.db_path);
  if (o.enable_incremental) storage::enable_incremental_vacuum(db);
  const storage::prune_options options{
      .cutoff = proto::unix_now() - *age, .dead = o.dead, .batch_rows = o.batch};
  const auto r = storage::prune(db, options);
  const auto bytes_after = file_bytes(o.db_path);
  const auto wal_bytes = file_bytes(o.db_path + "-wal");
  const auto ms = [](std::chrono::microseconds d) {
    return static_cast<double>(d.count()) / 1000.0;
  };
  const double longest_ms = ms(r.longest_transaction);
  if (o.json) {
    boost::json::object out{{"deliveries", r.deliveries},
                            {"attempts", r.attempts},
                            {"transactions", r.transactions},
                            {"longest_transaction_ms", longest_ms},
                            {"median_transaction_ms", ms(r.median_transaction)},
                            {"p99_transaction_ms", ms(r.p99_transaction)},
                            {"pages_reclaimed", r.pages_reclaimed},
                            {"free_pages", r.free_pages},
                            {"incremental_vacuum", r.incremental_vacuum},
                            {"file_bytes_before", bytes_before},
                            {"file_bytes_after", bytes_after},
                            {"wal_bytes", wal_bytes}};
    std::cout << json_text(out) << "\n";
    return exit_ok;
  }
  std::printf(
      "pruned: deliveries=%lld attempts=%lld transactions=%lld lock_held_ms(median/p99/max)="
      "%.1f/%.1f/%.1f pages_reclaimed=%lld free_pages=%lld file_bytes=%ju->%ju wal_bytes=%ju\n",
      static_cast<long long>(r.deliveries), static_cast<long long>(r.attempts),
      static_cast<long long>(r.transactions), ms(r.median_transaction), ms(r.p99_transaction),
      longest_ms, static_cast<long long>(r.pages_reclaimed), static_cast<long long>(r.free_pages),
      bytes_before, bytes_after, wal_bytes);
  if (!r.incremental_vacuum && r.free_pages > 0) {
    std::printf(
        "note: %lld free pages stay in the file and are reused by new rows; run once "
        "with --enable-incremental-vacuum (rewrites the file, holding the write lock) "
        "to have later prunes return them to the file system\n",
        static_cast<long long>(r.free_pages));
  }
  return exit_ok;
}

}  // namespace

void add_prune_command(CLI::App& app, command_action& action) {
  auto* cmd = app.add_subcommand(
      "prune",
      "Delete done rows (and, with --dead, dead letters) finished before now minus "
      "--older-than, with their surge_attempt records, in short BEGIN IMMEDIATE batches. "
      "Due, leased and retrying rows are never touched.");
  auto o = std::make_shared<prune_cli>();
  cmd->add_option("--db", o->db_path, "Queue: a SQLite file or a postgresql:// URI")
      ->required()
      ->check(existing_queue());
  add_queue_shape_option(cmd, o->shape);
  cmd->add_option("--older-than", o->older_than,
                  "Age of the rows to delete: 30d, 12h, 90m, 45s, 2w or seconds")
      ->required();
  cmd->add_flag("--dead", o->dead, "Also delete dead letters (kept by default)");
  cmd->add_option("--batch", o->batch, "Rows deleted per write transaction")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  cmd->add_flag("--enable-incremental-vacuum", o->enable_incremental,
                "First switch the file to auto_vacuum=INCREMENTAL with a VACUUM (a one-off "
                "rewrite that holds the write lock throughout: run it in a quiet moment), so "
                "this and later prunes shrink the file");
  cmd->add_flag("--json", o->json, "Print the result as JSON");
  add_config_option(cmd);
  cmd->callback([&action, o] { action = [o] { return run_prune(*o); }; });
}

}  // namespace surge::tools
