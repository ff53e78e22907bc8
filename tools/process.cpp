#include "tools/process.hpp"

#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <spawn.h>
#include <sstream>
#include <sys/resource.h>
#include <sys/wait.h>
#include <system_error>
#include <thread>
#include <unistd.h>

extern char** environ;

namespace surge::tools {

child_process::child_process(const std::string& program, const std::vector<std::string>& args,
                             const std::string& stdout_path, const std::string& stderr_path) {
  std::vector<std::string> storage{program};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& arg : storage) argv.push_back(arg.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!stdout_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, 1, stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
  }
  if (!stderr_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
  }
  const int rc = posix_spawn(&pid_, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::system_error(rc, std::generic_category(), "spawning " + program);
}

child_process::child_process(child_process&& other) noexcept
    : pid_(other.pid_), peak_rss_kib_(other.peak_rss_kib_), status_(other.status_) {
  other.pid_ = -1;
}

child_process::~child_process() {
  if (pid_ > 0 && !status_) stop(std::chrono::seconds(2));
}

void child_process::signal(int signal_number) const {
  if (pid_ > 0 && !status_) ::kill(pid_, signal_number);
}

std::optional<int> child_process::wait(std::chrono::milliseconds timeout) {
  if (status_) return status_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int raw = 0;
    rusage usage{};
    const pid_t done = ::wait4(pid_, &raw, WNOHANG, &usage);
    if (done == pid_) {
      peak_rss_kib_ = usage.ru_maxrss;
      status_ = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
      return status_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

int child_process::stop(std::chrono::milliseconds grace) {
  signal(SIGTERM);
  if (auto status = wait(grace)) return *status;
  signal(SIGKILL);
  return wait(std::chrono::seconds(10)).value_or(-1);
}

std::optional<std::string> find_program(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

std::string self_executable() {
  char buffer[4096];
  const auto n = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) throw std::system_error(errno, std::generic_category(), "readlink /proc/self/exe");
  return std::string(buffer, static_cast<std::size_t>(n));
}

std::optional<std::string> wait_for_file(const std::string& path,
                                         std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(path);
    std::stringstream content;
    content << in.rdbuf();
    if (in && !content.str().empty()) return content.str();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

}  // namespace surge::tools
