// surge dead list|show|replay: look at dead-lettered deliveries and put them back in the queue.
#include <cstdio>
#include <iostream>
#include <limits>
#include <optional>

#include <boost/json/value.hpp>

#include "proto/clock.hpp"
#include "storage/connection.hpp"
#include "storage/database.hpp"
#include "storage/dead_letters.hpp"
#include "storage/schema.hpp"
#include "tools/commands.hpp"
#include "tools/json_text.hpp"
#include "tools/time_arg.hpp"

namespace surge::tools {

namespace {

struct dead_options {
  std::string db_path;
  std::string shape;
  std::optional<std::string> subscribers, since;
  std::vector<std::string> ids;  // replay --id, each an id or a list such as 12,15,20-25
  std::optional<std::int64_t> limit;
  bool json = false;
};

void add_selection_options(CLI::App* cmd, dead_options& o) {
  cmd->add_option("--db", o.db_path, "Queue: a SQLite file or a postgresql:// URI")
      ->required()
      ->check(existing_queue());
  add_queue_shape_option(cmd, o.shape);
  cmd->add_option("--subscriber,--subscribers", o.subscribers,
                  "Only these subscribers: an id or a list such as 1,4,10-20");
  cmd->add_option("--since", o.since,
                  "Only rows created at or after TIME: Unix seconds, ISO-8601 with a zone "
                  "(2026-11-21T06:00:00Z), or an age (-45s, -30m, -2h, -1d)");
  cmd->add_flag("--json", o.json, "Print JSON");
}

storage::dead_selection selection(const dead_options& o, double now) {
  storage::dead_selection which;
  if (o.subscribers) {
    std::string error;
    auto ids = proto::id_set::parse(*o.subscribers, &error);
    if (!ids) throw usage_error("bad --subscriber '" + *o.subscribers + "': " + error);
    which.subscribers = std::move(*ids);
  }
  if (!o.ids.empty()) {
    std::string joined;
    for (const auto& item : o.ids) joined += (joined.empty() ? "" : ",") + item;
    std::string error;
    auto ids = proto::id_set::parse(joined, &error);
    if (!ids) throw usage_error("bad --id '" + joined + "': " + error);
    which.ids = std::move(*ids);
  }
  if (o.since) {
    which.created_since = parse_time_arg(*o.since, now);
    if (!which.created_since) {
      throw usage_error("bad --since '" + *o.since +
                        "': expected Unix seconds, an ISO-8601 time with a zone such as "
                        "2026-11-21T06:00:00Z, or an age such as -2h, -30m, -45s");
    }
  }
  which.limit = o.limit;
  return which;
}

storage::connection open_migrated(const dead_options& o) {
  // Dead rows carry last_status/last_error only from migration 1 on; migrating is a no-op
  // (no write lock) on a current file.
  storage::connection db(
      {.location = o.db_path, .create_if_missing = false, .shape = named_shape(o.shape)});
  storage::migrate(db);
  return db;
}

boost::json::object to_json(const storage::dead_row& row) {
  boost::json::object out{{"id", row.id},
                          {"subscriber_id", row.subscriber_id},
                          {"event_type", row.event_type},
                          {"attempts", row.attempts},
                          {"last_status", nullptr},
                          {"last_error", nullptr},
                          {"created_at", row.created_at}};
  if (row.last_status != 0) out["last_status"] = row.last_status;
  if (!row.last_error.empty()) out["last_error"] = row.last_error;
  return out;
}

int list(const dead_options& o) {
  auto which = selection(o, proto::unix_now());
  const std::int64_t shown = which.limit.value_or(100);
  which.limit = shown + 1;  // one more, to say when there are more than shown
  auto db = open_migrated(o);
  auto rows = storage::list_dead(db, which);
  const bool more = static_cast<std::int64_t>(rows.size()) > shown;
  if (more) rows.pop_back();
  if (o.json) {
    boost::json::array out;
    for (const auto& row : rows) out.push_back(to_json(row));
    std::cout << json_text(out) << "\n";
    return exit_ok;
  }
  std::printf("%10s %10s %-24s %8s %6s %-20s  %s\n", "id", "subscriber", "event_type", "attempts",
              "status", "created_at", "last_error");
  for (const auto& r : rows) {
    const std::string status = r.last_status ? std::to_string(r.last_status) : "-";
    std::printf("%10lld %10lld %-24s %8lld %6s %-20s  %s\n", static_cast<long long>(r.id),
                static_cast<long long>(r.subscriber_id), r.event_type.c_str(),
                static_cast<long long>(r.attempts), status.c_str(),
                format_utc(r.created_at).c_str(),
                r.last_error.empty() ? "-" : r.last_error.c_str());
  }
  if (more) {
    std::printf("(the newest %lld shown; --limit N for more)\n", static_cast<long long>(shown));
  } else if (rows.empty()) {
    std::printf("(no dead deliveries match)\n");
  }
  return exit_ok;
}

boost::json::value optional_time(const std::optional<double>& at) {
  if (!at) return nullptr;
  return *at;
}

int show(const dead_options& o, std::int64_t id) {
  auto db = open_migrated(o);
  const auto row = storage::find_delivery(db, id);
  if (!row) {
    std::cerr << "surge: no delivery " << id << " in " << storage::printable_location(o.db_path)
              << "\n";
    return exit_failure;
  }
  if (!row->dead()) {
    std::cerr << "surge: delivery " << id << " is not dead (its status is '" << row->status
              << "'); dead show shows dead-lettered deliveries only\n";
    return exit_failure;
  }
  if (o.json) {
    boost::json::object out{{"id", row->id},
                            {"subscriber_id", row->subscriber_id},
                            {"event_type", row->event_type},
                            {"status", row->status},
                            {"attempts", row->attempts},
                            {"last_status", nullptr},
                            {"last_error", nullptr},
                            {"created_at", row->created_at},
                            {"finished_at", optional_time(row->finished_at)},
                            {"payload_bytes", row->payload.size()},
                            {"payload", row->payload}};
    if (row->last_status != 0) out["last_status"] = row->last_status;
    if (!row->last_error.empty()) out["last_error"] = row->last_error;
    std::cout << json_text(out) << "\n";
    return exit_ok;
  }
  std::cout << "id:            " << row->id << "\n"
            << "subscriber:    " << row->subscriber_id << "\n"
            << "event_type:    " << row->event_type << "\n"
            << "status:        " << row->status << "\n"
            << "attempts:      " << row->attempts << "\n"
            << "last_status:   "
            << (row->last_status ? std::to_string(row->last_status) : std::string("-")) << "\n"
            << "last_error:    " << (row->last_error.empty() ? "-" : row->last_error) << "\n"
            << "created_at:    " << format_utc(row->created_at) << "\n"
            << "finished_at:   " << (row->finished_at ? format_utc(*row->finished_at) : "-") << "\n"
            << "payload_bytes: " << row->payload.size() << "\n"
            << "payload:\n"
            << row->payload << "\n";
  return exit_ok;
}

int replay(const dead_options& o) {
  const double now = proto::unix_now();
  const auto which = selection(o, now);
  auto db = open_migrated(o);
  const auto report = storage::replay_dead(db, which, now);
  if (o.json) {
    boost::json::array inactive;
    for (const auto id : report.inactive_subscribers) inactive.push_back(id);
    std::cout << json_text(boost::json::object{{"replayed", report.replayed},
                                               {"inactive_subscribers", inactive}})
              << "\n";
    return exit_ok;
  }
  std::cout << "replayed " << report.replayed
            << " dead deliveries: pending again, attempts reset to 0, due now, with a fresh "
               "retry window (created_at = now)\n";
  if (!report.inactive_subscribers.empty()) {
    std::cout << "note: inactive or unknown subscriber(s):";
    for (const auto id : report.inactive_subscribers) std::cout << " " << id;
    std::cout << "; rows of an inactive subscriber stay queued until it is enabled "
                 "(surge subscriber enable --db "
              << o.db_path << " ID), rows of an unknown one are dead-lettered again\n";
  }
  return exit_ok;
}

}  // namespace

void add_dead_command(CLI::App& app, command_action& action) {
  auto* group =
      app.add_subcommand("dead", "List or show dead-lettered deliveries, or replay them.");
  group->require_subcommand(1, 1);

  auto list_opts = std::make_shared<dead_options>();
  auto* list_cmd = group->add_subcommand(
      "list",
      "Show dead rows, newest first (id, subscriber, event, attempts, last status and "
      "error, created_at).");
  add_selection_options(list_cmd, *list_opts);
  list_cmd->add_option("--limit", list_opts->limit, "Show at most N rows (default 100)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1'000'000'000}));
  list_cmd->callback([&action, list_opts] { action = [list_opts] { return list(*list_opts); }; });

  auto show_opts = std::make_shared<dead_options>();
  auto show_id = std::make_shared<std::int64_t>(0);
  auto* show_cmd = group->add_subcommand(
      "show",
      "Show one dead row in full: subscriber, event, attempts, last status and error, created "
      "and finished times, payload size and payload. Exit 1 when it is not dead or not there.");
  show_cmd->add_option("--db", show_opts->db_path, "Queue: a SQLite file or a postgresql:// URI")
      ->required()
      ->check(existing_queue());
  add_queue_shape_option(show_cmd, show_opts->shape);
  show_cmd->add_option("ID", *show_id, "The delivery's id (as dead list shows it)")
      ->required()
      ->check(CLI::Range(std::int64_t{1}, std::numeric_limits<std::int64_t>::max()));
  show_cmd->add_flag("--json", show_opts->json, "Print JSON");
  show_cmd->callback([&action, show_opts, show_id] {
    action = [show_opts, show_id] { return show(*show_opts, *show_id); };
  });

  auto replay_opts = std::make_shared<dead_options>();
  auto* replay_cmd = group->add_subcommand(
      "replay",
      "Put the selected dead rows (all of them without --id/--subscriber/--since/--limit) back "
      "to pending with attempts 0, due now and created_at now (a fresh retry window), in one "
      "transaction. last_status/last_error are kept until the next attempt.");
  add_selection_options(replay_cmd, *replay_opts);
  replay_cmd->add_option("--id", replay_opts->ids,
                         "Only these dead rows: an id or a list such as 12,15,20-25; repeatable");
  replay_cmd->add_option("--limit", replay_opts->limit, "Replay only the newest N selected rows")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1'000'000'000}));
  replay_cmd->callback(
      [&action, replay_opts] { action = [replay_opts] { return replay(*replay_opts); }; });
}

}  // namespace surge::tools
