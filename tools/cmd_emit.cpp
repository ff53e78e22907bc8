// surge emit: the producer side, fanning one event out to every matching active subscriber.
#include <fstream>
#include <iostream>
#include <sstream>

#include <boost/json/parse.hpp>

#include "proto/clock.hpp"
#include "proto/header_value.hpp"
#include "storage/connection.hpp"
#include "storage/database.hpp"
#include "storage/queue.hpp"
#include "storage/schema.hpp"
#include "tools/commands.hpp"

namespace surge::tools {

namespace {
struct emit_options {
  std::string db_path;
  std::string shape;
  std::string type;
  std::string data;
  std::string data_file;
  int count = 1;
};
}  // namespace

void add_emit_command(CLI::App& app, command_action& action) {
  auto* cmd = app.add_subcommand(
      "emit", "Queue one event for every active subscriber whose event filter matches it.");
  auto opts = std::make_shared<emit_options>();
  cmd->add_option("--db", opts->db_path, "Queue: a SQLite file or a postgresql:// URI")
      ->required()
      ->check(existing_queue());
  add_queue_shape_option(cmd, opts->shape);
  cmd->add_option("--type", opts->type, "Event type, e.g. video.trending")->required();
  auto* data = cmd->add_option("--data", opts->data, "JSON payload (the exact bytes POSTed)");
  auto* file = cmd->add_option("--data-file", opts->data_file, "File holding the JSON payload")
                   ->check(CLI::ExistingFile);
  data->excludes(file);
  cmd->add_option("--count", opts->count, "Copies of the event to queue")
      ->check(CLI::Range(1, 10'000'000));
  cmd->callback([&action, opts] {
    action = [opts] {
      std::string payload = opts->data;
      if (!opts->data_file.empty()) {
        std::ifstream in(opts->data_file, std::ios::binary);
        std::ostringstream content;
        content << in.rdbuf();
        payload = content.str();
      } else if (opts->data.empty()) {
        throw usage_error("emit needs --data or --data-file");
      }
      // The type becomes the X-VVV-Event header: a CR/LF would inject headers or a request.
      if (const auto problem = proto::header_value_problem(opts->type); !problem.empty()) {
        throw usage_error("--type " + std::string(problem) +
                          ": an event type may hold only visible ASCII, spaces and tabs");
      }
      boost::system::error_code ec;
      boost::json::parse(payload, ec);
      if (ec) throw usage_error("the payload is not valid JSON: " + ec.message());
      storage::connection db({.location = opts->db_path,
                              .create_if_missing = false,
                              .shape = named_shape(opts->shape)});
      storage::migrate(db);
      const auto rows =
          storage::emit_event(db, opts->type, payload, proto::unix_now(), opts->count);
      std::cout << "queued " << rows << " deliveries\n";
      return exit_ok;
    };
  });
}

}  // namespace surge::tools
