#pragma once
// Shared pieces of the sink tests: a temp dir, a queue file with subscribers, signed requests,
// a loopback HTTP/TLS client with timeouts, and a test PKI made with the openssl CLI.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/beast/core/error.hpp>

#include "storage/sqlite/subscribers.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_pki.hpp"
#include "tools/sink/request_handler.hpp"

namespace surge::sink::testing {

using surge::testing::make_test_pki;
using surge::testing::temp_dir;
using surge::testing::test_pki;

// Subscribers the tests use: 1 vvv, 2 standard (the known-answer secret), 3..9 vvv.
inline constexpr std::int64_t vvv_id = 1;
inline constexpr std::int64_t standard_id = 2;
inline const std::string vvv_secret = "sink-test-secret";
inline const std::string standard_secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

storage::subscriber_row make_subscriber(std::int64_t id, const std::string& signing = "vvv",
                                        const std::string& secret = vvv_secret);
// Creates the queue (migrate) and inserts the rows.
void create_queue(const std::string& path, const std::vector<storage::subscriber_row>& rows);
void add_subscriber(const std::string& path, const storage::subscriber_row& row);
std::vector<storage::subscriber_row> default_subscribers();

struct delivery {
  std::int64_t subscriber_id = vvv_id;
  std::string delivery_id = "1001";
  int attempt = 1;
  std::string event_type = "video.trending";
  std::string body = R"({"video":42})";
};

// A request as the drainer sends it, signed with the subscriber's scheme and secret.
request_type signed_request(const delivery& d, const storage::subscriber_row& subscriber);
// The same headers without any signature.
request_type unsigned_request(const delivery& d);

struct exchange {
  boost::beast::error_code error;
  std::optional<response_type> response;
};

// One client connection (plain, or TLS trusting only `ca_file`). Every operation runs the
// client's own io_context on the calling thread, bounded by a timeout.
class test_client {
 public:
  explicit test_client(std::uint16_t port);
  // TLS; an empty ca_file trusts nothing, so verification of any server must fail.
  test_client(std::uint16_t port, const std::string& ca_file,
              const std::string& host_name = "localhost");
  ~test_client();

  boost::beast::error_code connect(std::chrono::milliseconds timeout = std::chrono::seconds(5));
  exchange send(request_type request, std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Reads one more response, e.g. the final one after a "100 Continue".
  exchange receive(std::chrono::milliseconds timeout = std::chrono::seconds(5));

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// Connects, sends once and returns the outcome (a fresh connection per call).
exchange send_once(std::uint16_t port, request_type request,
                   std::chrono::milliseconds timeout = std::chrono::seconds(5));

std::vector<std::string> read_lines(const std::string& path);
std::vector<std::string> split_csv(const std::string& line);

}  // namespace surge::sink::testing
