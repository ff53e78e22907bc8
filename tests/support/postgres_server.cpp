#include "tests/support/postgres_server.hpp"

#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace surge::testing {

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr auto ready_timeout = 30s;
constexpr auto stop_timeout = 30s;

bool executable(const fs::path& file) { return ::access(file.c_str(), X_OK) == 0; }

bool complete(const fs::path& bin_dir, postgres_server::binaries& out) {
  if (!executable(bin_dir / "initdb") || !executable(bin_dir / "postgres")) return false;
  out = {bin_dir / "initdb", bin_dir / "postgres"};
  return true;
}

// The last `max_chars` of a file, for exception messages: the end of a log says why.
std::string tail(const std::string& file, std::size_t max_chars = 4000) {
  std::ifstream in(file);
  if (!in) return "(no log at " + file + ")";
  std::ostringstream text;
  text << in.rdbuf();
  std::string all = text.str();
  if (all.size() > max_chars) all = "..." + all.substr(all.size() - max_chars);
  return all;
}

// Percent-encodes a URI component; '/' stays so socket paths remain readable.
std::string uri_encode(const std::string& text) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) != 0 || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 0xF];
    }
  }
  return out;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// waitpid without blocking: true when `pid` is gone (reaped now, or not our child any more, as
// when SIGCHLD is ignored and the kernel reaped it), with its status when known.
bool exited(pid_t pid, int* status) {
  int local = 0;
  pid_t got = 0;
  do {
    got = ::waitpid(pid, &local, WNOHANG);
  } while (got < 0 && errno == EINTR);
  if (got == pid) {
    if (status != nullptr) *status = local;
    return true;
  }
  if (got < 0 && errno == ECHILD) return ::kill(pid, 0) != 0 && errno == ESRCH;
  return false;
}

bool wait_exit(pid_t pid, std::chrono::steady_clock::duration timeout, int* status) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!exited(pid, status)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

struct pg_conn_closer {
  void operator()(PGconn* conn) const { ::PQfinish(conn); }
};
using pg_conn = std::unique_ptr<PGconn, pg_conn_closer>;

}  // namespace

bool postgres_server::find_binaries(binaries& out, std::string* why_not) {
  // Debian installs each major version side by side; 15 is what production runs.
  const fs::path root = "/usr/lib/postgresql";
  if (complete(root / "15" / "bin", out)) return true;
  int best = -1;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(root, error)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(),
                                     [](unsigned char c) { return std::isdigit(c) != 0; }))
      continue;
    binaries found;
    if (std::stoi(name) > best && complete(entry.path() / "bin", found)) {
      best = std::stoi(name);
      out = found;
    }
  }
  if (best >= 0) return true;
  // Other distributions and hand-built servers: initdb on $PATH, postgres next to it.
  if (const char* path = std::getenv("PATH")) {
    std::istringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');) {
      if (!dir.empty() && complete(dir, out)) return true;
    }
  }
  if (why_not != nullptr) {
    *why_not = "PostgreSQL server binaries not found (install the Debian package postgresql-15)";
  }
  return false;
}

postgres_server* postgres_server::shared(std::string* why_not) {
  // Function statics: built on first use, destroyed (server stopped, dir removed) at exit.
  static std::mutex mutex;
  static std::unique_ptr<postgres_server> server;
  static bool tried = false;
  static std::string missing;
  static std::string failure;
  const std::lock_guard lock(mutex);
  if (!tried) {
    tried = true;
    binaries bins;
    if (!find_binaries(bins, &missing)) {
      // missing says why
    } else if (::geteuid() == 0 && ::getpwnam("postgres") == nullptr) {
      missing =
          "running as root needs the OS user `postgres` to run the PostgreSQL server "
          "(install the Debian package postgresql-15)";
    } else {
      try {
        server = std::make_unique<postgres_server>(bins);
      } catch (const std::exception& e) {
        failure = e.what();
      }
    }
  }
  if (server) return server.get();
  if (!failure.empty()) throw std::runtime_error(failure);
  if (why_not != nullptr) *why_not = missing;
  return nullptr;
}

postgres_server::postgres_server(binaries bins)
    : bins_(std::move(bins)), dir_(std::make_unique<temp_dir>()), owner_pid_(::getpid()) {
  data_dir_ = dir_->path() / "data";
  // Only the unix socket is used and its dir is ours, so the number merely names the socket
  // file; the pid makes it differ between processes for whoever reads `ps` or logs.
  port_ = 50000 + static_cast<int>(owner_pid_ % 10000);
  if (::geteuid() == 0) {
    // initdb and postgres refuse to run as root; CI runs the tests as root.
    const passwd* user = ::getpwnam("postgres");
    if (user == nullptr)
      throw std::runtime_error("running as root and there is no OS user postgres");
    switch_user_ = true;
    run_uid_ = user->pw_uid;
    run_gid_ = user->pw_gid;
    // The server writes its data dir, socket and lock files here. Root reaches the socket
    // anyway: it bypasses the 0700 of mkdtemp.
    if (::chown(dir_->path().c_str(), run_uid_, run_gid_) != 0) {
      throw std::runtime_error("chown " + dir_->path().string() + ": " + std::strerror(errno));
    }
  }
  init_data_dir();
  start();
}

postgres_server::~postgres_server() {
  if (::getpid() != owner_pid_) {
    // A forked child exiting: the server and its files belong to the parent.
    static_cast<void>(dir_.release());
    return;
  }
  const std::lock_guard lock(mutex_);
  stop_locked();
}

pid_t postgres_server::spawn(const std::vector<std::string>& argv,
                             const std::string& log_file) const {
  // Everything the child needs is prepared before fork: between fork and exec a multi-threaded
  // process may only make async-signal-safe calls (no allocation).
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const std::string work_dir = dir_->path().string();
  const int log_fd = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) throw std::runtime_error("open " + log_file + ": " + std::strerror(errno));
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    ::close(log_fd);
    throw std::runtime_error(std::string("open /dev/null: ") + std::strerror(errno));
  }
  // A server outliving a crashed test process would keep running for nothing: the kernel
  // signals it when the forking thread dies. Only from the main thread, whose end is the
  // process's end; a worker thread that started the server may end long before the tests do.
  const bool die_with_parent = ::gettid() == ::getpid();
  const pid_t parent = ::getpid();
  const bool switch_user = switch_user_;
  const uid_t uid = run_uid_;
  const gid_t gid = run_gid_;

  const pid_t pid = ::fork();
  if (pid == 0) {
    const auto fail = [](const char* what) {
      const char prefix[] = "surge postgres_server: child setup failed: ";
      static_cast<void>(::write(2, prefix, sizeof prefix - 1));
      static_cast<void>(::write(2, what, std::strlen(what)));
      static_cast<void>(::write(2, "\n", 1));
      ::_exit(127);
    };
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);  // the test process may block signals
    if (::dup2(null_fd, 0) < 0 || ::dup2(log_fd, 1) < 0 || ::dup2(log_fd, 2) < 0) fail("dup2");
    // The server's OS user may not be allowed into the test's working directory.
    if (::chdir(work_dir.c_str()) != 0) fail("chdir");
    if (switch_user) {
      if (::setgroups(0, nullptr) != 0) fail("setgroups");
      if (::setgid(gid) != 0) fail("setgid");
      if (::setuid(uid) != 0) fail("setuid");
    }
    // After setuid, which clears the parent-death signal.
    if (die_with_parent) {
      if (::prctl(PR_SET_PDEATHSIG, SIGINT) != 0) fail("prctl");
      if (::getppid() != parent) ::_exit(1);  // the parent died before prctl
    }
    ::execv(args[0], args.data());
    fail("execv");
    ::_exit(127);  // not reached: fail exits
  }
  const int fork_errno = errno;
  ::close(log_fd);
  ::close(null_fd);
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(fork_errno));
  return pid;
}

void postgres_server::init_data_dir() {
  const std::string log = dir_->file("initdb.log");
  // --no-locale and UTF8: the same sort order and encoding on every machine. --no-sync: a test
  // server never survives a power cut.
  const pid_t pid = spawn({bins_.initdb.string(), "-D", data_dir_.string(), "-U", superuser, "-A",
                           "trust", "-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions"},
                          log);
  int status = 0;
  if (!wait_exit(pid, 120s, &status)) {
    ::kill(pid, SIGKILL);
    wait_exit(pid, 10s, nullptr);
    throw std::runtime_error("initdb did not finish in 120 s:\n" + tail(log));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error(bins_.initdb.string() + " failed (" + describe_status(status) +
                             "):\n" + tail(log));
  }
}

void postgres_server::start() {
  const std::lock_guard lock(mutex_);
  if (postmaster_ > 0 && !exited(postmaster_, nullptr)) return;
  postmaster_ = -1;
  // Durability off: a test server's data is thrown away, and fsync makes DDL-heavy tests slow.
  postmaster_ =
      spawn({bins_.postgres.string(), "-D", data_dir_.string(), "-k", dir_->path().string(), "-c",
             "listen_addresses=", "-p", std::to_string(port_), "-c", "fsync=off", "-c",
             "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=100"},
            log_path());
  wait_until_ready();
}

void postgres_server::wait_until_ready() {
  const auto deadline = std::chrono::steady_clock::now() + ready_timeout;
  const std::string conninfo = uri("postgres") + "&connect_timeout=5";
  std::string last_error;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (exited(postmaster_, &status)) {
      postmaster_ = -1;
      throw std::runtime_error("postgres exited while starting (" + describe_status(status) +
                               "), log " + log_path() + ":\n" + tail(log_path()));
    }
    const pg_conn conn(::PQconnectdb(conninfo.c_str()));
    if (conn && ::PQstatus(conn.get()) == CONNECTION_OK) return;
    last_error = conn ? ::PQerrorMessage(conn.get()) : "out of memory";
    std::this_thread::sleep_for(20ms);
  }
  stop_locked();
  throw std::runtime_error("postgres did not accept connections within 30 s (last error: " +
                           last_error + "), log " + log_path() + ":\n" + tail(log_path()));
}

void postgres_server::signal_all(int signal) {
  const std::lock_guard lock(mutex_);
  if (postmaster_ <= 0) return;
  std::ifstream children("/proc/" + std::to_string(postmaster_) + "/task/" +
                         std::to_string(postmaster_) + "/children");
  pid_t child = 0;
  while (children >> child) ::kill(child, signal);
  ::kill(postmaster_, signal);
}

void postgres_server::stop() {
  const std::lock_guard lock(mutex_);
  stop_locked();
}

void postgres_server::stop_locked() noexcept {
  if (postmaster_ <= 0) return;
  const pid_t pid = postmaster_;
  postmaster_ = -1;
  // SIGINT is the fast shutdown: sessions are rolled back and ended, then a checkpoint.
  ::kill(pid, SIGINT);
  if (wait_exit(pid, stop_timeout, nullptr)) return;
  ::kill(pid, SIGQUIT);  // immediate shutdown
  if (wait_exit(pid, 5s, nullptr)) return;
  ::kill(pid, SIGKILL);
  wait_exit(pid, 5s, nullptr);
}

void postgres_server::crash() {
  const std::lock_guard lock(mutex_);
  if (postmaster_ <= 0) return;
  const pid_t pid = postmaster_;
  postmaster_ = -1;
  ::kill(pid, SIGQUIT);
  if (wait_exit(pid, 5s, nullptr)) return;
  ::kill(pid, SIGKILL);
  wait_exit(pid, 5s, nullptr);
}

bool postgres_server::running() const {
  const std::lock_guard lock(mutex_);
  if (postmaster_ > 0 && exited(postmaster_, nullptr)) postmaster_ = -1;
  return postmaster_ > 0;
}

std::string postgres_server::uri(const std::string& database) const {
  return "postgresql:///" + uri_encode(database) + "?host=" + uri_encode(dir_->path().string()) +
         "&port=" + std::to_string(port_) + "&user=" + superuser;
}

std::string postgres_server::create_database() {
  const std::string name = "surge_t" + std::to_string(next_database_++);
  const pg_conn conn(::PQconnectdb(uri("postgres").c_str()));
  if (!conn || ::PQstatus(conn.get()) != CONNECTION_OK) {
    throw std::runtime_error("connecting to the test server: " +
                             std::string(conn ? ::PQerrorMessage(conn.get()) : "out of memory"));
  }
  PGresult* result = ::PQexec(conn.get(), ("CREATE DATABASE " + name).c_str());
  const bool ok = result != nullptr && ::PQresultStatus(result) == PGRES_COMMAND_OK;
  ::PQclear(result);
  if (!ok) {
    throw std::runtime_error("CREATE DATABASE " + name + ": " + ::PQerrorMessage(conn.get()));
  }
  return uri(name);
}

}  // namespace surge::testing
