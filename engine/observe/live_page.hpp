#pragma once
// The live page at / on the metrics listener: the partner view as a table that refreshes
// itself, and the partner hosts as their adaptive limits see them, for an operator with no
// Grafana. The page is static; it reads /partners.json.
#include <string>
#include <vector>

#include "engine/observe/partner_view.hpp"

namespace surge::engine {

// The partner view as JSON: {"now":…, "totals":{…}, "partners":[{…}, …], "hosts":[{…}, …]};
// the hosts that hold subscribers back by their own limit first, then the busiest.
std::string partners_json(const std::vector<partner_row>& rows, std::vector<origin_snapshot> hosts,
                          double now_unix);

const std::string& live_page_html();

}  // namespace surge::engine
