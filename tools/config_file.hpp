#pragma once
// `--config FILE` for a subcommand: every long flag of it can be set in a TOML/INI file
// (`name = value`, the flag's name without the leading dashes, optionally under a [drain]
// section); a flag given on the command line wins. CLI11 2.1 reads config files for the top
// level app only, so parse_command_line() turns the file's entries into flags before parsing.
#include <CLI/CLI.hpp>

namespace surge::tools {

// Declares --config on `cmd`, for --help and so that the command line accepts it.
void add_config_option(CLI::App* cmd);

// app.parse(argc, argv) after adding the flags from the chosen subcommand's --config file that
// the command line does not give. A missing file, a line that is not `name = value`, an unknown
// key or a bad value throws a CLI::ParseError naming the file and the key.
void parse_command_line(CLI::App& app, int argc, char** argv);

}  // namespace surge::tools
