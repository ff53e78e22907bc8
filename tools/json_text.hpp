#pragma once
// The JSON text the `--json` outputs print. Boost.JSON writes every double in exponent form
// ("2E1", "5E-1", "0E0"), which scripts and people both read badly: here a double that holds a
// whole number is written as an integer ("20"), any other in plain decimal notation, the
// shortest that reads back as the same double ("0.5", "1795240800.25").
#include <string>

#include <boost/json/value.hpp>

namespace surge::tools {

std::string json_text(const boost::json::value& value);

}  // namespace surge::tools
