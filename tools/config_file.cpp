#include "tools/config_file.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/bounded_file.hpp"

namespace surge::tools {

namespace {

// A drain's flags fit in a few hundred bytes; anything near this is not a config file (a device,
// a log named by mistake) and must not be read into memory whole.
constexpr std::uintmax_t max_config_bytes = 64 * 1024;
// How much of a line an error message quotes.
constexpr std::size_t quoted_chars = 60;

std::string excerpt(std::string_view text) {
  std::string out;
  for (const char c : text.substr(0, quoted_chars)) {
    // Control bytes would garble the terminal the message is read on.
    out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c;
  }
  if (text.size() > quoted_chars) out += "...";
  return out;
}

bool control_byte(char c) {
  return (static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f;
}

std::string trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r");
  return std::string(text.substr(first, last - first + 1));
}

// The file's text (engine/bounded_file.hpp: a regular file, a device such as /dev/zero or a FIFO
// refused) of at most max_config_bytes, without a leading UTF-8 byte order mark.
std::string read_config(const std::string& path) {
  std::string text;
  try {
    text = engine::read_bounded_file(path, max_config_bytes, "--config");
  } catch (const engine::file_read_error& error) {
    if (error.missing) throw CLI::FileError::Missing(path);
    throw CLI::FileError(std::string(error.what()) + "; --config names a TOML file");
  }
  if (text.starts_with("\xEF\xBB\xBF")) text.erase(0, 3);
  return text;
}

struct entry {
  std::string key;
  std::vector<std::string> values;  // one, or an array's elements
  int line = 0;
};

class line_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A quoted TOML string starting at text[at] (a '"' or '\''); `at` ends past its closing quote.
std::string quoted(std::string_view text, std::size_t& at) {
  const char quote = text[at++];
  std::string out;
  while (at < text.size()) {
    const char c = text[at++];
    if (c == quote) return out;
    if (c != '\\' || quote == '\'') {
      out += c;
      continue;
    }
    if (at >= text.size()) break;
    switch (const char escaped = text[at++]) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      default: throw line_error(std::string("unknown escape \\") + escaped + " in a string");
    }
  }
  throw line_error("a string is not closed");
}

// One value (quoted, bare or an array) from text[at]; `at` ends past it.
void parse_value(std::string_view text, std::size_t& at, std::vector<std::string>& out,
                 bool in_array) {
  if (text[at] == '"' || text[at] == '\'') {
    out.push_back(quoted(text, at));
    return;
  }
  if (text[at] == '[' && !in_array) {
    ++at;
    while (true) {
      at = text.find_first_not_of(" \t", at);
      if (at == std::string_view::npos) throw line_error("an array is not closed");
      if (text[at] == ']') {
        ++at;
        return;
      }
      parse_value(text, at, out, true);
      at = text.find_first_not_of(" \t", at);
      if (at == std::string_view::npos) throw line_error("an array is not closed");
      if (text[at] == ',') {
        ++at;
      } else if (text[at] != ']') {
        throw line_error("expected ',' or ']' in an array");
      }
    }
  }
  const auto end = text.find_first_of(in_array ? " \t,]#" : " \t#", at);
  const auto word = text.substr(at, end == std::string_view::npos ? text.size() - at : end - at);
  if (word.empty()) throw line_error("a value is missing");
  out.emplace_back(word);
  at += word.size();
}

// The entries of the file for `command` (none or its own [section]), in file order.
std::vector<entry> parse_config(const std::string& path, const std::string& text,
                                const std::string& command) {
  std::vector<entry> entries;
  std::map<std::string, int> seen;  // key -> line it was first set on
  std::size_t start = 0;
  for (int number = 1; start <= text.size(); ++number) {
    auto end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view raw(text.data() + start, end - start);
    start = end + 1;
    const std::string line = trim(raw);
    const std::string where = path + ":" + std::to_string(number) + ": ";
    // TOML allows no control byte but a tab anywhere, comments included; passed on, a NUL would
    // silently cut the value at the flag's parser.
    if (const auto bad = std::find_if(line.begin(), line.end(), control_byte); bad != line.end()) {
      char code[5];
      std::snprintf(code, sizeof code, "0x%02X", static_cast<unsigned char>(*bad));
      throw CLI::ConfigError(where + "a control byte (" + code + ") at column " +
                             std::to_string(bad - line.begin() + 1) +
                             "; write it as an escape or remove it: " + excerpt(line));
    }
    if (line.empty() || line[0] == '#' || line[0] == ';') {
      if (end == text.size()) break;
      continue;
    }
    try {
      if (line[0] == '[') {
        const auto close = line.find(']');
        if (close == std::string::npos) throw line_error("a [section] is not closed");
        const auto rest = trim(std::string_view(line).substr(close + 1));
        if (!rest.empty() && rest[0] != '#') throw line_error("text after a [section]");
        const auto section = trim(std::string_view(line).substr(1, close - 1));
        if (section != command) {
          throw line_error("unknown section [" + section + "] (only [" + command + "] or none)");
        }
      } else {
        const auto equals = line.find('=');
        if (equals == std::string::npos) throw line_error("expected `name = value` or `[section]`");
        entry item;
        item.key = trim(std::string_view(line).substr(0, equals));
        item.line = number;
        if (item.key.empty()) throw line_error("a name is missing before '='");
        std::replace(item.key.begin(), item.key.end(), '_', '-');
        std::size_t at = line.find_first_not_of(" \t", equals + 1);
        if (at == std::string::npos) throw line_error("a value is missing after '='");
        parse_value(line, at, item.values, false);
        at = line.find_first_not_of(" \t", at);
        if (at != std::string::npos && line[at] != '#') {
          throw line_error("text after the value (quote a value that holds spaces or '#')");
        }
        const auto [first, fresh] = seen.emplace(item.key, number);
        if (!fresh) {
          throw line_error("'" + item.key + "' is set again (first on line " +
                           std::to_string(first->second) + "); set each key once");
        }
        entries.push_back(std::move(item));
      }
    } catch (const line_error& failure) {
      throw CLI::ConfigError(where + failure.what() + ": " + excerpt(line));
    }
    if (end == text.size()) break;
  }
  return entries;
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

// Where a flag taken from the file was set, so that a value CLI11 refuses names its line.
struct file_flag {
  std::string option;  // the option's name as CLI11's errors give it ("--lease")
  std::string key;
  int line = 0;
};

std::vector<std::string> flags_from_file(CLI::App& cmd, const std::string& path,
                                         const std::vector<std::string>& args,
                                         std::vector<file_flag>& origins) {
  std::vector<std::string> out;
  for (const auto& item : parse_config(path, read_config(path), cmd.get_name())) {
    const std::string flag = "--" + item.key;
    const CLI::Option* option = cmd.get_option_no_throw(flag);
    if (option == nullptr || flag == "--config" || flag == "--help") {
      throw CLI::ConfigError(path + ":" + std::to_string(item.line) + ": unknown key '" +
                             excerpt(item.key) + "': not a flag of surge " + cmd.get_name() +
                             " (see --help)");
    }
    if (std::any_of(
            option->get_lnames().begin(), option->get_lnames().end(),
            [&](const std::string& name) { return given_on_command_line(args, "--" + name); })) {
      continue;
    }
    origins.push_back({option->get_name(), item.key, item.line});
    if (option->get_type_size() == 0) {
      // A switch: `name = true` sets it, `name = false` leaves it off.
      if (item.values.size() != 1 || (item.values[0] != "true" && item.values[0] != "false")) {
        throw CLI::ConfigError(path + ":" + std::to_string(item.line) + ": '" + item.key +
                               "' is a switch: true or false");
      }
      if (item.values[0] == "true") out.push_back(flag);
    } else if (item.values.size() == 1) {
      out.push_back(flag + "=" + item.values[0]);
    } else {
      out.push_back(flag);
      out.insert(out.end(), item.values.begin(), item.values.end());
    }
  }
  return out;
}

}  // namespace

void add_config_option(CLI::App* cmd) {
  cmd->add_option("--config",
                  "Read flags from this TOML file (a regular file of at most 64 KiB): one "
                  "`name = value` per line, named like the long flags without dashes (db = "
                  "\"/var/lib/surge/queue.db\", until-drained = true); flags given on the command "
                  "line win; an unknown or repeated key is an error")
      ->type_name("FILE");
}

void parse_command_line(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<file_flag> origins;
  std::string path;
  CLI::App* cmd = nullptr;
  if (!args.empty()) {
    const auto found =
        app.get_subcommands([&](CLI::App* sub) { return sub->get_name() == args[0]; });
    if (!found.empty()) cmd = found.front();
  }
  if (cmd != nullptr && cmd->get_option_no_throw("--config") != nullptr) {
    path = config_path(args);
    if (!path.empty()) {
      auto extra = flags_from_file(*cmd, path, args, origins);
      args.insert(args.begin() + 1, extra.begin(), extra.end());
    }
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
  try {
    app.parse(args);
  } catch (const CLI::ConfigError&) {
    throw;
  } catch (const CLI::ParseError& error) {
    // CLI11 names the option whose value it refused ("--lease: '2x' is not a duration"); when
    // that value came from the file, say where in the file, as for the file's other errors.
    const std::string message = error.what();
    for (const auto& origin : origins) {
      const auto at = message.find(origin.option);
      if (at == std::string::npos) continue;
      const auto after = at + origin.option.size();
      if (after < message.size() &&
          (std::isalnum(static_cast<unsigned char>(message[after])) || message[after] == '-')) {
        continue;  // another option whose name starts with this one
      }
      throw CLI::ConfigError(path + ":" + std::to_string(origin.line) + ": bad value for '" +
                             excerpt(origin.key) + "': " + message);
    }
    throw;
  }
}

}  // namespace surge::tools
