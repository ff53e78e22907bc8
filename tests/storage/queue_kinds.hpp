#pragma once
// The kinds of queue storage's door leads to, for tests parameterized over all of them: the
// seed000 and seed001 shapes on SQLite, and PostgreSQL.
#include <gtest/gtest.h>

#include <string>

namespace surge::storage::testing {

enum class queue_kind { seed000, seed001, postgres };

inline auto all_queue_kinds() {
  return ::testing::Values(queue_kind::seed000, queue_kind::seed001, queue_kind::postgres);
}

inline std::string queue_kind_name(const ::testing::TestParamInfo<queue_kind>& info) {
  switch (info.param) {
    case queue_kind::seed000: return "SQLiteSeed000";
    case queue_kind::seed001: return "SQLiteSeed001";
    case queue_kind::postgres: return "PostgreSQL";
  }
  return "";
}

}  // namespace surge::storage::testing
