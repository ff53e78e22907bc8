#pragma once
// A throwaway PostgreSQL server for the tests: initdb into a fresh temp dir, one postmaster per
// test process listening only on a unix socket inside that dir, so parallel test processes
// (ctest -j) never share a server, a port or a file. Durability is off (fsync, full pages,
// synchronous commit): a crashed test server is thrown away, never recovered.
//
// No libpq in this header: the fixture library links it privately, and users that only want a
// URI need not see it.
#include <sys/types.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tests/support/temp_dir.hpp"

namespace surge::testing {

class postgres_server {
 public:
  // The server of this test process, started on first use and stopped at process exit (static
  // destructor, in the process that started it only: a forked child that exits does not stop
  // it). nullptr when the server binaries are missing; then *why_not (if given) says what is
  // missing and names the Debian package `postgresql-15`. Throws std::runtime_error (with the
  // server log's tail) when the binaries are there but the server does not come up: that is a
  // broken setup, and skipping would hide it. The failure is remembered, so later calls throw
  // the same message at once instead of trying again.
  static postgres_server* shared(std::string* why_not = nullptr);

  // initdb and postgres from one installation.
  struct binaries {
    std::filesystem::path initdb;
    std::filesystem::path postgres;
  };
  // /usr/lib/postgresql/15/bin, else the newest /usr/lib/postgresql/*/bin, else $PATH. False
  // (and *why_not set) when there is none.
  static bool find_binaries(binaries& out, std::string* why_not);

  // A server of its own (not shared), for a test that wants to break one. Runs initdb and
  // starts the server; throws std::runtime_error on failure.
  explicit postgres_server(binaries bins);
  ~postgres_server();
  postgres_server(const postgres_server&) = delete;
  postgres_server& operator=(const postgres_server&) = delete;

  // Creates a fresh empty database with a unique name and returns its libpq URI, e.g.
  // "postgresql:///surge_t3?host=/tmp/xyz&port=54329&user=surge". Throws std::runtime_error on
  // failure. Safe to call from several threads.
  std::string create_database();
  // A URI for an existing database name.
  std::string uri(const std::string& database) const;

  // Fault tests: stop the server (fast shutdown, waits until it is down) and start it again on
  // the same socket/port and data dir (waits until it accepts connections). Not for use while
  // another thread calls stop()/start().
  void stop();
  void start();
  // An immediate shutdown (pg_ctl -m immediate, SIGQUIT): no checkpoint, sessions killed, what
  // was still in the server's WAL buffers lost, as in a crash; recovery runs at the next start.
  void crash();
  bool running() const;
  // Sends `signal` to the postmaster and every process it has forked (SIGSTOP freezes the whole
  // server, as a hung host would; SIGCONT thaws it).
  void signal_all(int signal);

  const std::filesystem::path& socket_dir() const { return dir_->path(); }
  int port() const { return port_; }
  // The server's stderr (its log), appended to across restarts.
  std::string log_path() const { return dir_->file("postgres.log"); }

  static constexpr const char* superuser = "surge";

 private:
  // Runs initdb as the server's OS user; throws with its output on failure.
  void init_data_dir();
  // Forks and execs argv as the server's OS user with stdout/stderr appended to log_file.
  pid_t spawn(const std::vector<std::string>& argv, const std::string& log_file) const;
  void wait_until_ready();
  // Fast shutdown, then SIGQUIT and SIGKILL if the server ignores it; no-op when not running.
  void stop_locked() noexcept;

  binaries bins_;
  // Removed by the destructor after the server stopped. A pointer so that a forked child of the
  // test process, whose exit runs static destructors too, can leave it alone.
  std::unique_ptr<temp_dir> dir_;
  std::filesystem::path data_dir_;
  int port_ = 0;
  // Root cannot run initdb/postgres: then the server runs as the `postgres` OS user.
  bool switch_user_ = false;
  uid_t run_uid_ = 0;
  gid_t run_gid_ = 0;
  pid_t owner_pid_ = 0;  // the process that started the server; only it stops it
  mutable std::mutex mutex_;
  mutable pid_t postmaster_ = -1;  // running() reaps a postmaster that died on its own
  std::atomic<int> next_database_{1};
};

}  // namespace surge::testing

// In a TEST body: declares `server_var` (a postgres_server*) and GTEST_SKIP()s with the reason
// when no server can be had (binaries missing). Needs <gtest/gtest.h>, which this header does
// not include because the fixture library does not link GoogleTest.
#define SURGE_REQUIRE_POSTGRES(server_var)                                             \
  std::string surge_postgres_why_not_##server_var;                                     \
  ::surge::testing::postgres_server* const server_var =                                \
      ::surge::testing::postgres_server::shared(&surge_postgres_why_not_##server_var); \
  if (server_var != nullptr) {                                                         \
  } else                                                                               \
    GTEST_SKIP() << surge_postgres_why_not_##server_var
