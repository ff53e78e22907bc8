// Every file Surge reads whole goes through one bounded read (engine/bounded_file.hpp): a device,
// a FIFO or a directory is refused by kind, a file over the bound by size, and each error names
// the path. The same rule reaches the client certificate, its key and the CA bundle.
#include "engine/bounded_file.hpp"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "engine/net/client_identity.hpp"
#include "engine/net/tls_sessions.hpp"
#include "tests/support/temp_dir.hpp"

namespace surge::engine {
namespace {

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// What read_bounded_file threw for `path`, or "" when it read it.
std::string problem_of(const std::string& path, std::uintmax_t max_bytes = 1024) {
  try {
    read_bounded_file(path, max_bytes, "test file");
    return {};
  } catch (const file_read_error& error) {
    return error.what();
  }
}

TEST(BoundedFile, AFileWithinTheBoundIsReadWhole) {
  testing::temp_dir dir;
  const auto path = dir.file("a.pem");
  write(path, std::string(1024, 'x'));
  EXPECT_EQ(read_bounded_file(path, 1024, "test file"), std::string(1024, 'x'));
  write(path, "");
  EXPECT_EQ(read_bounded_file(path, 1024, "test file"), "");
}

TEST(BoundedFile, ALargerFileIsRefusedBySizeWithItsPath) {
  testing::temp_dir dir;
  const auto path = dir.file("big.pem");
  write(path, std::string(1025, 'x'));
  const auto problem = problem_of(path);
  EXPECT_NE(problem.find("test file " + path + ": 1025 bytes; at most 1024"), std::string::npos)
      << problem;
}

TEST(BoundedFile, DevicesFifosAndDirectoriesAreRefusedByKindEvenThroughALink) {
  testing::temp_dir dir;
  const auto zero = dir.file("zero.pem");
  std::filesystem::create_symlink("/dev/zero", zero);
  EXPECT_NE(problem_of(zero).find(zero + ": not a regular file (a character device)"),
            std::string::npos);
  const auto fifo = dir.file("fifo.pem");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // With no writer, a plain open would wait here for one.
  EXPECT_NE(problem_of(fifo).find("not a regular file (a FIFO)"), std::string::npos);
  EXPECT_NE(problem_of(dir.path().string()).find("not a regular file (a directory)"),
            std::string::npos);
}

TEST(BoundedFile, AMissingFileSaysSo) {
  testing::temp_dir dir;
  try {
    read_bounded_file(dir.file("none.pem"), 10, "test file");
    FAIL() << "read a file that is not there";
  } catch (const file_read_error& error) {
    EXPECT_TRUE(error.missing);
    EXPECT_NE(std::string(error.what()).find("none.pem"), std::string::npos);
  }
}

TEST(BoundedFile, CertificatesKeysAndCaBundlesAreReadWithTheBound) {
  testing::temp_dir dir;
  const auto zero = dir.file("zero.pem");
  std::filesystem::create_symlink("/dev/zero", zero);
  try {
    load_client_identity(http_client_config{}, zero, zero);
    FAIL() << "loaded /dev/zero as a certificate";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("client certificate " + zero + ": not a regular file"),
              std::string::npos)
        << error.what();
  }
  http_client_config config;
  config.ca_file = zero;
  try {
    make_client_tls_context(config);
    FAIL() << "loaded /dev/zero as a CA bundle";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("CA file " + zero + ": not a regular file"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace surge::engine
