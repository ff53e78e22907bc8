#include "tests/support/tinyproxy.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tests/support/e2e.hpp"

namespace surge::testing {

namespace {

std::string write_conf(const std::string& root, std::uint16_t port,
                       const std::vector<std::uint16_t>& connect_ports) {
  const auto path = root + "/tinyproxy.conf";
  std::ofstream conf(path);
  conf << "Port " << port << "\nListen 127.0.0.1\nTimeout 30\nMaxClients 200\n"
       << "LogFile \"" << root << "/tinyproxy.log\"\nLogLevel Connect\n"
       << "PidFile \"" << root << "/tinyproxy.pid\"\nAllow 127.0.0.1\n";
  for (auto p : connect_ports) conf << "ConnectPort " << p << "\n";
  return path;
}

bool accepts(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return ok;
}

std::string tinyproxy_binary() {
  if (auto found = tools::find_program("tinyproxy")) return *found;
  if (std::filesystem::exists("/usr/bin/tinyproxy")) return "/usr/bin/tinyproxy";
  throw std::runtime_error("tinyproxy is not installed (Debian package tinyproxy)");
}

}  // namespace

tinyproxy_process::tinyproxy_process(const temp_dir& dir,
                                     const std::vector<std::uint16_t>& connect_ports)
    : root_(dir.file("tinyproxy")),
      port_(unused_port()),
      process_(
          tinyproxy_binary(),
          {"-d", "-c",
           write_conf((std::filesystem::create_directories(root_), root_), port_, connect_ports)},
          root_ + "/stdout", root_ + "/stderr") {
  for (int i = 0; i < 200; ++i) {
    if (accepts(port_)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  std::ifstream err(root_ + "/stderr");
  std::stringstream text;
  text << err.rdbuf();
  throw std::runtime_error("tinyproxy did not start: " + text.str());
}

std::vector<std::string> tinyproxy_process::requests() const {
  std::vector<std::string> out;
  std::ifstream log(root_ + "/tinyproxy.log");
  std::string line;
  const std::string marker = "): ";
  while (std::getline(log, line)) {
    if (line.find("Request (file descriptor") == std::string::npos) continue;
    out.push_back(line.substr(line.find(marker) + marker.size()));
  }
  return out;
}

}  // namespace surge::testing
