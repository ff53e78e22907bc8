#pragma once
// Child processes for `surge demo`, `surge audit --chart` and the tests: spawn, signal, wait.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace surge::tools {

class child_process {
 public:
  // Starts `program` with `args` (argv[0] excluded); stdout/stderr go to the given files when
  // set, else are inherited. Throws std::system_error when the spawn fails.
  child_process(const std::string& program, const std::vector<std::string>& args,
                const std::string& stdout_path = {}, const std::string& stderr_path = {});
  ~child_process();
  child_process(child_process&& other) noexcept;
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int signal_number) const;
  // Exit status (128 + signal when killed); nullopt when still running after `timeout`.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  // SIGTERM, then SIGKILL if it has not exited within `grace`.
  int stop(std::chrono::milliseconds grace = std::chrono::seconds(5));
  // Once wait() has seen it exit: its peak resident set (ru_maxrss) in KiB, 0 before that.
  long peak_rss_kib() const { return peak_rss_kib_; }

 private:
  pid_t pid_ = -1;
  long peak_rss_kib_ = 0;
  std::optional<int> status_;
};

// The running executable, for spawning our own subcommands.
std::string self_executable();

// The full path of an executable `name` found on $PATH (child_process does not search), or
// nullopt when there is none.
std::optional<std::string> find_program(const std::string& name);

// Waits until `path` exists and is non-empty, returning its content; nullopt on timeout.
std::optional<std::string> wait_for_file(const std::string& path,
                                         std::chrono::milliseconds timeout);

}  // namespace surge::tools
