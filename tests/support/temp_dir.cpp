#include "tests/support/temp_dir.hpp"

#include <cstdlib>
#include <stdexcept>
#include <unistd.h>

namespace surge::testing {

temp_dir::temp_dir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "surge-test-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

temp_dir::~temp_dir() {
  if (std::getenv("SURGE_KEEP_TEST_DIRS") == nullptr) {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
}

}  // namespace surge::testing
