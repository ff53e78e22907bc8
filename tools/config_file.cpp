#include "tools/config_file.hpp"

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

namespace surge::tools {

namespace {

// CLI11's reader skips lines it cannot parse; a config line that silently does nothing would
// run the drain with a default the operator thought they had changed.
void check_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw CLI::FileError::Missing(path);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#' || line[first] == ';') continue;
    const auto last = line.find_last_not_of(" \t\r");
    const bool section = line[first] == '[' && line[last] == ']';
    if (!section && line.find('=') == std::string::npos) {
      throw CLI::ConfigError(path + ":" + std::to_string(number) +
                             ": expected `name = value` or `[section]`, got: " + line);
    }
  }
}

bool given_on_command_line(const std::vector<std::string>& args, const std::string& flag) {
  return std::any_of(args.begin(), args.end(), [&](const std::string& arg) {
    return arg == flag || arg.rfind(flag + "=", 0) == 0;
  });
}

std::string config_path(const std::vector<std::string>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind("--config=", 0) == 0) return args[i].substr(9);
  }
  return {};
}

std::vector<std::string> flags_from_file(CLI::App& cmd, const std::string& path,
                                         const std::vector<std::string>& args) {
  check_lines(path);
  std::vector<std::string> out;
  for (const auto& item : CLI::ConfigTOML().from_file(path)) {
    if (item.name == "++" || item.name == "--") continue;  // section markers
    const std::string where = path + ": ";
    if (!item.parents.empty() && !(item.parents.size() == 1 && item.parents[0] == cmd.get_name())) {
      throw CLI::ConfigError(where + "unknown section [" + item.parents[0] + "] (only [" +
                             cmd.get_name() + "] or none)");
    }
    std::string name = item.name;
    std::replace(name.begin(), name.end(), '_', '-');
    const std::string flag = "--" + name;
    const CLI::Option* option = cmd.get_option_no_throw(flag);
    if (option == nullptr || flag == "--config" || flag == "--help") {
      throw CLI::ConfigError(where + "unknown key '" + item.name + "': not a flag of surge " +
                             cmd.get_name() + " (see --help)");
    }
    if (given_on_command_line(args, flag)) continue;
    if (item.inputs.size() == 1) {
      out.push_back(flag + "=" + item.inputs[0]);
    } else {
      out.push_back(flag);
      out.insert(out.end(), item.inputs.begin(), item.inputs.end());
    }
  }
  return out;
}

}  // namespace

void add_config_option(CLI::App* cmd) {
  cmd->add_option("--config",
                  "Read flags from this TOML/INI file: one `name = value` per line, "
                  "named like the long flags without dashes (db = \"/var/lib/surge/"
                  "queue.db\", until-drained = true); flags given on the command "
                  "line win; an unknown key is an error")
      ->type_name("FILE");
}

void parse_command_line(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  CLI::App* cmd = nullptr;
  if (!args.empty()) {
    const auto found =
        app.get_subcommands([&](CLI::App* sub) { return sub->get_name() == args[0]; });
    if (!found.empty()) cmd = found.front();
  }
  if (cmd != nullptr && cmd->get_option_no_throw("--config") != nullptr) {
    const std::string path = config_path(args);
    if (!path.empty()) {
      auto extra = flags_from_file(*cmd, path, args);
      args.insert(args.begin() + 1, extra.begin(), extra.end());
    }
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
  app.parse(args);
}

}  // namespace surge::tools
