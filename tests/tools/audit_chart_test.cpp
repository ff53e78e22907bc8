// The audit chart's data: failures are drawn beside deliveries, so a partner that failed
// everything does not look like an idle one.
#include "tools/audit_chart.hpp"

#include <gtest/gtest.h>

namespace surge::tools {
namespace {

TEST(AuditChart, EachSecondCarriesItsDeliveriesAndItsFailuresAndGapsDropToZero) {
  const std::vector<chart_series> series = {
      {.subscriber_id = 4,
       .answers = {{.second = 100, .delivered = 3, .failed = 1},
                   {.second = 101, .failed = 2},
                   {.second = 105, .delivered = 1}}},
      {.subscriber_id = 6}};
  EXPECT_EQ(chart_data(series, 100),
            "# subscriber 4\n"
            "0 3 1\n"
            "1 0 2\n"
            "2 0 0\n"
            "4 0 0\n"
            "5 1 0\n"
            "6 0 0\n"
            "\n\n"
            "# subscriber 6\n"
            "0 0 0\n"
            "\n\n");
}

}  // namespace
}  // namespace surge::tools
