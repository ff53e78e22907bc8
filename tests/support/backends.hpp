#pragma once
// End-to-end tests that run against both kinds of queue: a SQLite file and a throwaway
// PostgreSQL database (tests/support/postgres_server.hpp), skipped only when the server binaries
// are missing.
#include <memory>
#include <ostream>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/e2e.hpp"
#include "tests/support/postgres_server.hpp"

namespace surge::testing {

enum class backend { sqlite, postgres };

inline auto all_backends() { return ::testing::Values(backend::sqlite, backend::postgres); }

inline void PrintTo(backend kind, std::ostream* out) {
  *out << (kind == backend::sqlite ? "SQLite" : "PostgreSQL");
}

inline std::string backend_name(const ::testing::TestParamInfo<backend>& info) {
  return info.param == backend::sqlite ? "SQLite" : "PostgreSQL";
}

// A fresh migrated queue of the kind asked for.
inline std::unique_ptr<test_queue> make_test_queue(backend kind, const temp_dir& dir,
                                                   postgres_server* server) {
  if (kind == backend::sqlite) return std::make_unique<test_queue>(dir);
  return std::make_unique<test_queue>(test_queue::at_location{server->create_database()});
}

}  // namespace surge::testing

// In a TEST_P body: declares `var` (a std::unique_ptr<test_queue>) of the kind asked for, or
// skips the test, naming the missing package, when that kind cannot be had here.
#define SURGE_QUEUE_FOR(kind, dir, var)                                                   \
  ::surge::testing::postgres_server* surge_server_##var = nullptr;                        \
  if ((kind) == ::surge::testing::backend::postgres) {                                    \
    std::string surge_why_not_##var;                                                      \
    surge_server_##var = ::surge::testing::postgres_server::shared(&surge_why_not_##var); \
    if (surge_server_##var == nullptr) GTEST_SKIP() << surge_why_not_##var;               \
  }                                                                                       \
  auto var = ::surge::testing::make_test_queue((kind), (dir), surge_server_##var)
