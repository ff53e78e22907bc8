#pragma once
// This process out of file descriptors, for the tests of what the drain does then: the soft
// limit held at the lowest free descriptor, so that the next one asked for fails with EMFILE.
// Under the sanitizers, run the code under test once before: UBSan checks a virtual call's
// object through a pipe the first time it sees its type, and the pipe needs descriptors too.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

namespace surge::engine::testing {

// Until `restore` (or the end of its scope), assert nothing: gtest's messages need descriptors.
class descriptors_exhausted {
 public:
  descriptors_exhausted() {
    getrlimit(RLIMIT_NOFILE, &kept_);
    const int probe = ::open("/dev/null", O_RDONLY);
    ::close(probe);
    const rlimit none_left{static_cast<rlim_t>(probe), kept_.rlim_max};
    exhausted_ = probe > 0 && setrlimit(RLIMIT_NOFILE, &none_left) == 0;
  }
  ~descriptors_exhausted() { restore(); }
  bool exhausted() const { return exhausted_; }
  void restore() { setrlimit(RLIMIT_NOFILE, &kept_); }

 private:
  rlimit kept_{};
  bool exhausted_ = false;
};

}  // namespace surge::engine::testing
