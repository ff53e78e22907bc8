#pragma once
// The `surge sink` receiver: an HTTP/1.1 (optionally TLS) server that verifies webhook
// signatures, answers with configured per-subscriber behaviours and records every request.
// Asio stays behind the pimpl so that the command and the tests compile quickly.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "tools/sink/behaviour.hpp"

namespace surge::sink {

struct sink_config {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;  // 0: the kernel picks, see sink_server::port()
  std::string db_path;     // the queue file; must exist
  std::string tls_cert;    // PEM chain; with tls_key switches the listener to TLS
  std::string tls_key;
  // "1.1", "1.2" or "1.3": the newest TLS version served; empty: any from 1.2 up. "1.1" serves
  // only TLS 1.1 (at OpenSSL security level 0), to test that clients refuse it.
  std::string tls_max_version;
  behaviour_set behaviours;
  std::uint64_t seed = 1;   // for "mix" picks
  std::string record_path;  // empty: no CSV record
  int threads = 1;
  std::size_t body_limit = 1024 * 1024;
  // Longer than the drainer's idle eviction, so the drainer, not the sink, retires connections.
  std::chrono::seconds idle_timeout{60};
};

class sink_server {
 public:
  // Opens the queue file, the record file and the TLS context, then binds and listens, so the
  // port is known before start(). Throws on any failure.
  explicit sink_server(sink_config config);
  ~sink_server();
  sink_server(const sink_server&) = delete;
  sink_server& operator=(const sink_server&) = delete;

  std::uint16_t port() const;
  // "127.0.0.1:8080" or "[::1]:8080": the bound address.
  std::string address() const;

  // Runs config.threads io threads in the background.
  void start();
  // Stops accepting, closes every connection (hanging and delayed ones too), joins the threads
  // and flushes the record. Idempotent; also done by the destructor.
  void stop();

  std::string stats_json() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace surge::sink
