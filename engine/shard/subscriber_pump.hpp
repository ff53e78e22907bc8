#pragma once
// A subscriber's pump, carried out on the shard's machines: it gathers the facts, lets
// scheduling::next_pump_step decide, and carries each decision out until it has to wait (then it
// arms the subscriber's wake). Rows that cannot go are dead-lettered or given back; a request
// that may go starts an attempt: its token and slots taken, its rows, and the request written
// into a buffer from the pump's pool for the reactor to send. Sans-I/O: the core passes the time.
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "engine/memory/buffer_pool.hpp"
#include "engine/net/http_result.hpp"
#include "engine/observe/metrics.hpp"
#include "engine/shard/attempts.hpp"
#include "engine/shard/ready_rows.hpp"
#include "engine/shard/scheduling.hpp"
#include "engine/shard/shard_actions.hpp"
#include "engine/shard/shard_rows.hpp"
#include "engine/shard/slots.hpp"
#include "engine/shard/subscriber.hpp"
#include "engine/shard/wakes.hpp"

namespace surge::engine {

struct pump_config {
  row_checks checks;  // what every ready row is checked against before it may go
  std::string user_agent;
};

// The shard's machines a pump acts on; the core owns them.
struct pump_machines {
  shard_rows& rows;
  shard_slots& slots;
  wake_schedule& wakes;
  attempt_book& attempts;
  std::vector<send_action>& sends;  // the core's actions: each attempt started goes here
  drain_metrics& metrics;
};

class subscriber_pump {
 public:
  using steady = std::chrono::steady_clock;
  // An attempt that could not be sent at all (its request could not be written): settled as a
  // failed attempt by the core, before the pump goes on.
  using settle_unsendable = std::function<void(attempt_state&, const http_result&)>;

  subscriber_pump(pump_config config, pump_machines machines, settle_unsendable settle);

  // Runs the subscriber's pump at `now` until it has to wait. A stopping shard starts nothing.
  void run(subscriber_state& sub, shard_time now, bool stopping);
  // A request's buffer, back once its exchange is over.
  void give_back(std::string request) { request_buffers_.give_back(std::move(request)); }

 private:
  scheduling::pump_facts facts_of(subscriber_state& sub, shard_time now, bool stopping);
  void send_next(subscriber_state& sub, shard_time now);

  pump_config config_;
  pump_machines on_;
  settle_unsendable settle_unsendable_;
  buffer_pool request_buffers_;
};

}  // namespace surge::engine
