#include "engine/bounded_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace surge::engine {
namespace {

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

class descriptor {
 public:
  explicit descriptor(int fd) : fd_(fd) {}
  ~descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  descriptor(const descriptor&) = delete;
  descriptor& operator=(const descriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::string read_bounded_file(const std::string& path, std::uintmax_t max_bytes,
                              std::string_view what) {
  const std::string named = std::string(what) + " " + path;
  // O_NONBLOCK: opening a FIFO with no writer would otherwise wait here for one.
  descriptor file(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (file.get() < 0) {
    const int error = errno;
    throw file_read_error(named + ": " + std::strerror(error), error == ENOENT);
  }
  // The checks read the opened file, not the path again: a link swapped in between changes
  // nothing.
  struct stat info {};
  if (::fstat(file.get(), &info) != 0) {
    throw file_read_error(named + ": " + std::strerror(errno), false);
  }
  if (!S_ISREG(info.st_mode)) {
    throw file_read_error(named + ": not a regular file (" + kind_of(info.st_mode) + ")", false);
  }
  if (static_cast<std::uintmax_t>(info.st_size) > max_bytes) {
    throw file_read_error(named + ": " + std::to_string(info.st_size) + " bytes; at most " +
                              std::to_string(max_bytes) + " are read",
                          false);
  }
  std::string bytes(static_cast<std::size_t>(info.st_size) + 1, '\0');
  std::size_t got = 0;
  for (;;) {
    if (got == bytes.size()) {
      if (got > max_bytes) {
        throw file_read_error(
            named + ": grew past " + std::to_string(max_bytes) + " bytes while being read", false);
      }
      bytes.resize(std::min<std::uintmax_t>(max_bytes + 1, bytes.size() * 2));
    }
    const auto n = ::read(file.get(), bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw file_read_error(named + ": " + std::strerror(errno), false);
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  bytes.resize(got);
  return bytes;
}

}  // namespace surge::engine
