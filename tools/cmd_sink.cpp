// `surge sink`: the test receiver (tools/sink). Runs until SIGINT/SIGTERM, then flushes the
// record and exits 0.
#include <charconv>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "tools/commands.hpp"
#include "tools/sink/recorder.hpp"
#include "tools/file_limit.hpp"
#include "tools/sink/sink_server.hpp"

namespace surge::tools {

namespace {

struct sink_options {
  std::string listen;
  std::string db;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_max_version;
  std::string behaviours;
  std::string record;
  std::string port_file;
  int threads = 1;
  std::uint64_t seed = 1;
};

// "HOST:PORT" or "[v6]:PORT"; every interface only when asked for by name (0.0.0.0 or ::).
void parse_listen(const std::string& text, sink::sink_config& config) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) throw usage_error("--listen: expected HOST:PORT, got " + text);
  std::string host = text.substr(0, colon);
  const std::string port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  unsigned value = 0;
  const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || error != std::errc{} || end != port.data() + port.size() || value > 65535)
    throw usage_error("--listen: bad port in " + text);
  if (host.empty()) {
    throw usage_error("--listen: no host in " + text +
                      " (127.0.0.1:PORT for this machine only, 0.0.0.0:PORT for every interface)");
  }
  config.host = host;
  config.port = static_cast<std::uint16_t>(value);
}

// Written under a temporary name and renamed, so a reader polling for the file never sees a
// partial port number.
void write_port_file(const std::string& path, std::uint16_t port) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << port << "\n";
    if (!out.flush()) throw std::runtime_error("cannot write port file " + temporary);
  }
  std::filesystem::rename(temporary, path);
}

int run_sink(const sink_options& options) {
  sink::sink_config config;
  parse_listen(options.listen, config);
  config.db_path = options.db;
  config.tls_cert = options.tls_cert;
  config.tls_key = options.tls_key;
  config.tls_max_version = options.tls_max_version;
  config.record_path = options.record;
  config.threads = options.threads;
  config.seed = options.seed;
  if (!options.behaviours.empty()) {
    try {
      config.behaviours = sink::behaviour_set::load_file(options.behaviours);
    } catch (const std::invalid_argument& error) {
      throw usage_error(error.what());
    }
  }

  // Signals are caught before the address is announced: whoever starts the sink may signal it
  // as soon as it reads the "listening on" line or the port file.
  boost::asio::io_context signals_io;
  boost::asio::signal_set signals(signals_io, SIGINT, SIGTERM);
  signals.async_wait([](const boost::system::error_code&, int) {});

  // Each client connection is a descriptor: a drain's thousands must not meet a soft limit of
  // 1,024 here either.
  raise_soft_file_limit();
  sink::sink_server server(std::move(config));
  server.start();
  if (!options.port_file.empty()) write_port_file(options.port_file, server.port());
  std::cout << "listening on " << server.address() << std::endl;

  signals_io.run();
  server.stop();
  std::cerr << "surge sink: stopped; " << server.stats_json() << "\n";
  return exit_ok;
}

}  // namespace

void add_sink_command(CLI::App& app, command_action& action) {
  auto options = std::make_shared<sink_options>();
  CLI::App* command = app.add_subcommand(
      "sink",
      "Run a test webhook receiver: verifies signatures against the queue's subscribers, answers "
      "with per-subscriber behaviours and records every request.");
  command->add_option("--listen", options->listen, "HOST:PORT to listen on; port 0 picks one")
      ->required();
  command
      ->add_option("--db", options->db,
                   "The queue (a file or a postgresql:// URI) whose subscribers sign the "
                   "requests")
      ->required()
      ->check(existing_queue());
  auto* cert = command
                   ->add_option("--tls-cert", options->tls_cert,
                                "PEM certificate chain: serve HTTPS (TLS 1.2+)")
                   ->check(CLI::ExistingFile);
  auto* key = command->add_option("--tls-key", options->tls_key, "PEM private key for --tls-cert")
                  ->check(CLI::ExistingFile);
  cert->needs(key);
  key->needs(cert);
  command
      ->add_option("--tls-max-version", options->tls_max_version,
                   "Newest TLS version served: 1.2 or 1.3; 1.1 serves only TLS 1.1, to test "
                   "that clients refuse it")
      ->check(CLI::IsMember({"1.1", "1.2", "1.3"}))
      ->needs(cert);
  command
      ->add_option("--behaviours", options->behaviours,
                   "JSON file: per-subscriber answers keyed by id, \"*\" for the default")
      ->check(CLI::ExistingFile);
  command->add_option(
      "--record", options->record,
      std::string("CSV of every request, one line each, no header: ") + sink::record_columns);
  command->add_option("--threads", options->threads, "I/O threads")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  command->add_option("--port-file", options->port_file, "Write the bound port to this file");
  command->add_option("--seed", options->seed, "Seed for \"mix\" behaviours")
      ->capture_default_str();
  command->callback([options, &action] { action = [options] { return run_sink(*options); }; });
}

}  // namespace surge::tools
