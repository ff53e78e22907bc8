#pragma once
// The sink's TLS server context: TLS 1.2 and newer by default, or capped at an older version
// to test that clients refuse it.
#include <string>

#include <boost/asio/ssl/context.hpp>

namespace surge::sink {

// `max_version` is "", "1.1", "1.2" or "1.3"; throws std::invalid_argument for anything else
// and boost::system::system_error for an unreadable certificate or key.
boost::asio::ssl::context make_tls_context(const std::string& cert, const std::string& key,
                                           const std::string& max_version);

}  // namespace surge::sink
