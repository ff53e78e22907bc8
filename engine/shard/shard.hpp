#pragma once
// One reactor: an io_context on its own thread around a shard_core (engine/shard/core.hpp),
// which owns a slice of the subscribers (id % shards). The reactor reads the clocks, feeds the
// core its events, and performs the actions it answers with: claims and outcome writes go to the
// storage thread, requests to the HTTP client, and one timer wakes the core when it asked.
// Nothing here is shared with other shards.
#include <atomic>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "engine/config.hpp"
#include "engine/handoff.hpp"
#include "engine/net/client_identity.hpp"
#include "engine/net/http_client.hpp"
#include "engine/observe/metrics.hpp"
#include "engine/shard/core.hpp"

namespace surge::engine {

class shard final : public shard_endpoint {
 public:
  shard(int index, int shard_count, const drain_config& config, storage_endpoint& storage,
        std::shared_ptr<boost::asio::ssl::context> tls, drain_metrics& metrics);
  ~shard() override;

  void start();
  void join();

  void on_subscribers(std::vector<storage::subscriber_row> rows) override;
  void on_claimed(claim_reply reply) override;
  void on_new_rows(std::vector<std::int64_t> subscriber_ids, bool all) override;
  void on_taken(std::vector<std::int64_t> subscriber_ids) override;
  void on_disowned(std::vector<std::int64_t> subscriber_ids) override;

  // Stop: give buffered rows back, let in-flight attempts finish, hand buckets to storage.
  void begin_stop();
  // After the grace period: stop at once; attempts still in flight keep their leases, which
  // expire on their own.
  void abandon();
  bool finished() const { return finished_.load(); }

 private:
  class wire_gate_of_attempt;
  // An attempt waiting for the core's verdict at the wire gate.
  struct verdict_slot {
    boost::asio::steady_timer* signal = nullptr;
    std::optional<bool> go;
  };

  // Performs what the core asked for after an event, and re-arms the timer if it wants to be
  // woken sooner than it is armed for.
  void perform();
  boost::asio::awaitable<void> timer_loop();
  boost::asio::awaitable<void> exchange(send_action send);
  boost::asio::awaitable<bool> await_verdict(attempt_id attempt);

  int index_;
  storage_endpoint& storage_;
  boost::asio::io_context io_{1};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  http_client client_;
  client_identities identities_;  // the client certificates of this shard's subscribers
  stderr_log logger_;             // where the core's log lines go
  shard_core core_;
  boost::asio::steady_timer timer_;
  std::chrono::steady_clock::time_point armed_at_ = std::chrono::steady_clock::time_point::max();
  std::vector<verdict_slot> verdicts_;  // by attempt id
  std::vector<send_action> sends_;      // perform's, swapped with the core's list
  bool performing_ = false;
  std::thread thread_;
  std::atomic<bool> finished_{false};
};

}  // namespace surge::engine
