#pragma once
// nginx (Debian nginx-light) as a peer Surge did not write: a partner's own limiter, a TLS
// server that resumes sessions. One process in the foreground, everything inside the test's
// directory.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/temp_dir.hpp"
#include "tools/process.hpp"

namespace surge::testing {

// /usr/sbin/nginx or nginx on $PATH; nullopt when not installed.
std::optional<std::string> nginx_binary();

// The start of an nginx.conf whose files all live under `root` (pid, logs, temp paths), up to
// and including "http {": the caller adds its servers and the closing brace. master_process
// off: no user switch, so it runs as root or not.
std::string nginx_conf_prelude(const std::string& root);

// Starts `binary -p root -c root/nginx.conf` (the caller wrote the file) and waits until a
// GET of `ready_path` on the plain-HTTP `ready_port` answers 204. `nice_args` (for example
// {"-n", "-10"}) run it through nice when nice is on $PATH. Throws std::runtime_error with the
// error log when nginx does not come up.
tools::child_process start_nginx(const std::string& binary, const std::string& root,
                                 std::uint16_t ready_port, const std::string& ready_path = "/ready",
                                 const std::vector<std::string>& nice_args = {});

}  // namespace surge::testing
