#pragma once
// A fresh directory under the system temp dir, removed with its content afterwards (kept when
// SURGE_KEEP_TEST_DIRS is set, for looking at a failed run's files).
#include <filesystem>
#include <string>

namespace surge::testing {

class temp_dir {
 public:
  temp_dir();
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace surge::testing
