#pragma once
// Every file Surge reads whole (a --config file, a client certificate and its key, a CA bundle)
// is read here, with a bound: a regular file of at most `max_bytes`. A device such as /dev/zero
// never ends and a FIFO blocks, so either, named directly or through a link, is refused with
// its path, and nothing is read into memory beyond the bound.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace surge::engine {

// PEM files: a client certificate chain, its key, or a CA bundle (Debian's whole system bundle
// is about 200 KiB).
inline constexpr std::uintmax_t max_pem_file_bytes = 4 * 1024 * 1024;

struct file_read_error : std::runtime_error {
  file_read_error(const std::string& message, bool missing)
      : std::runtime_error(message), missing(missing) {}
  bool missing;  // no file at that path
};

// The bytes of the regular file at `path`, at most `max_bytes` of them. Throws file_read_error
// naming `what` and `path` ("client certificate /x: not a regular file (a character device)").
std::string read_bounded_file(const std::string& path, std::uintmax_t max_bytes,
                              std::string_view what);

}  // namespace surge::engine
