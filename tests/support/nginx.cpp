#include "tests/support/nginx.hpp"

#include <chrono>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tests/support/http_get.hpp"

namespace surge::testing {

std::optional<std::string> nginx_binary() {
  if (std::ifstream("/usr/sbin/nginx").good()) return "/usr/sbin/nginx";
  return tools::find_program("nginx");
}

std::string nginx_conf_prelude(const std::string& root) {
  std::ostringstream conf;
  conf << "daemon off;\nmaster_process off;\nworker_processes 1;\n"
       << "pid " << root << "/nginx.pid;\nerror_log " << root << "/error.log info;\n"
       << "events { worker_connections 4096; }\nhttp {\n";
  for (const char* temp : {"client_body", "proxy", "fastcgi", "uwsgi", "scgi"}) {
    conf << "  " << temp << "_temp_path " << root << "/" << temp << ";\n";
  }
  return conf.str();
}

tools::child_process start_nginx(const std::string& binary, const std::string& root,
                                 std::uint16_t ready_port, const std::string& ready_path,
                                 const std::vector<std::string>& nice_args) {
  std::vector<std::string> args = {
      binary, "-p", root, "-c", root + "/nginx.conf", "-e", root + "/error.log"};
  std::string program = binary;
  const auto nice = nice_args.empty() ? std::nullopt : tools::find_program("nice");
  if (nice) {
    program = *nice;
    args.insert(args.begin(), nice_args.begin(), nice_args.end());
  } else {
    args.erase(args.begin());
  }
  tools::child_process server(program, args, root + "/stdout", root + "/stderr");
  for (int i = 0; i < 200; ++i) {
    if (http_get(ready_port, ready_path).status == 204) return server;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  server.stop();
  std::ifstream log(root + "/error.log");
  std::ostringstream text;
  text << log.rdbuf();
  throw std::runtime_error("nginx did not start:\n" + text.str());
}

}  // namespace surge::testing
