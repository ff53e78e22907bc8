#include "engine/shard/shard.hpp"

#include <pthread.h>

#include <algorithm>
#include <random>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>

#include "engine/awaiting.hpp"
#include "engine/observe/log.hpp"

namespace surge::engine {

namespace asio = boost::asio;
using steady = std::chrono::steady_clock;

namespace {

// The clocks, read here once per event: the core is handed the time and reads none itself.
shard_time read_clocks() { return {steady::now(), std::chrono::system_clock::now()}; }

}  // namespace

// The core's wire gate, as the client's write gate for one attempt: asked right before the write,
// after connect and TLS.
class shard::wire_gate_of_attempt final : public http_client::write_gate {
 public:
  wire_gate_of_attempt(shard& owner, attempt_id attempt) : owner_(owner), attempt_(attempt) {}

  std::optional<bool> decide_now(bool fresh_connection, steady_time now) override {
    const auto answer = owner_.core_.on_write_ready(attempt_, fresh_connection,
                                                    {now, std::chrono::system_clock::now()});
    owner_.perform();
    return answer;
  }
  asio::awaitable<bool> wait(bool) override { return owner_.await_verdict(attempt_); }

 private:
  shard& owner_;
  attempt_id attempt_;
};

namespace {

// The client's connection ceiling is the whole process's, split evenly like max_in_flight.
http_client_config shard_share(http_client_config http, int shard_count) {
  if (http.max_connections > 0) {
    http.max_connections =
        std::max<std::size_t>(1, http.max_connections / static_cast<std::size_t>(shard_count));
  }
  return http;
}

}  // namespace

shard::shard(int index, int shard_count, const drain_config& config, storage_endpoint& storage,
             std::shared_ptr<asio::ssl::context> tls, drain_metrics& metrics)
    : index_(index),
      storage_(storage),
      work_(io_.get_executor()),
      client_(io_.get_executor(), std::move(tls), shard_share(config.http, shard_count),
              {.open_connections = &metrics.open_connections,
               .tls_full_handshakes = &metrics.tls_handshakes_full,
               .tls_resumed_handshakes = &metrics.tls_handshakes_resumed}),
      identities_(config.http),
      core_(index, shard_count, config, metrics, logger_, std::random_device{}(), read_clocks()),
      timer_(io_) {}

shard::~shard() { join(); }

namespace {

// The shard's coroutines rethrow what escapes them, so that io_context::run ends the shard with
// the error logged (start) rather than Asio's `detached` dropping it and leaving the shard
// without its timer or a request without its result.
void rethrow(std::exception_ptr error) {
  if (error) std::rethrow_exception(error);
}

}  // namespace

void shard::start() {
  asio::co_spawn(io_, timer_loop(), rethrow);
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "surge-shard");
    try {
      io_.run();
    } catch (const std::exception& error) {
      log_error(std::string("shard stopped by an internal error: ") + error.what());
      finished_ = true;
    }
  });
}

void shard::join() {
  if (thread_.joinable()) thread_.join();
}

void shard::on_subscribers(std::vector<storage::subscriber_row> rows) {
  asio::post(io_, [this, rows = std::move(rows)]() mutable {
    // Certificate files are read here, not in the core.
    std::vector<identity_lookup> identities;
    identities.reserve(rows.size());
    const auto at = std::time(nullptr);
    for (const auto& row : rows) {
      auto found = identities_.get(row.client_cert_file, row.client_key_file, at);
      identities.push_back({std::move(found.identity), std::move(found.problem)});
    }
    core_.on_subscribers(std::move(rows), std::move(identities), read_clocks());
    perform();
  });
}

void shard::on_claimed(claim_reply reply) {
  asio::post(io_, [this, reply = std::move(reply)]() mutable {
    core_.on_claimed(std::move(reply), read_clocks());
    perform();
  });
}

void shard::on_new_rows(std::vector<std::int64_t> subscriber_ids, bool all) {
  asio::post(io_, [this, ids = std::move(subscriber_ids), all] {
    core_.on_new_rows(ids, all, read_clocks());
    perform();
  });
}

void shard::on_taken(std::vector<std::int64_t> subscriber_ids) {
  asio::post(io_, [this, ids = std::move(subscriber_ids)] {
    core_.on_taken(ids, read_clocks());
    perform();
  });
}

void shard::on_disowned(std::vector<std::int64_t> subscriber_ids) {
  asio::post(io_, [this, ids = std::move(subscriber_ids)] {
    core_.on_disowned(ids, read_clocks());
    perform();
  });
}

void shard::begin_stop() {
  asio::post(io_, [this] {
    core_.begin_stop(read_clocks());
    perform();
  });
}

void shard::abandon() {
  asio::post(io_, [this] {
    if (finished_) return;
    core_.abandon(read_clocks());
    perform();
    io_.stop();
  });
}

void shard::perform() {
  // A request started here may run as far as its wire gate at once, and that event comes back
  // here: the outer call performs what it adds.
  if (performing_) return;
  struct performing_guard {
    bool& flag;
    explicit performing_guard(bool& f) : flag(f) { flag = true; }
    ~performing_guard() { flag = false; }
  } guard(performing_);
  for (;;) {
    auto& out = core_.actions();
    // Outcomes before the claim, which wakes the storage thread: a finished row of an ordered
    // key is then written in the same cycle that claims the key's next row.
    for (auto& write : out.writes) {
      storage_.submit(std::move(write.outcomes), std::move(write.deactivate));
    }
    if (!out.claim.empty()) storage_.request_claims(index_, std::move(out.claim));
    if (!out.quotas.empty()) storage_.submit_quotas(std::move(out.quotas));
    if (out.evict_idle) client_.evict_idle();
    for (const auto& verdict : out.verdicts) {
      if (verdict.attempt >= verdicts_.size()) verdicts_.resize(verdict.attempt + 1);
      auto& slot = verdicts_[verdict.attempt];
      slot.go = verdict.go;
      if (slot.signal) slot.signal->cancel();
    }
    // Swapped out, buffers and all: the sends started below may add to the core's list.
    sends_.swap(out.sends);
    std::optional<std::vector<storage::unspent_tokens>> unspent;
    unspent.swap(out.unspent);
    core_.clear_actions();
    for (auto& send : sends_) asio::co_spawn(io_, exchange(std::move(send)), rethrow);
    sends_.clear();
    if (unspent) {
      storage_.submit_unspent(std::move(*unspent));
      client_.close_idle();
      finished_ = true;
      work_.reset();
      timer_.cancel();
      break;
    }
    const auto& next = core_.actions();
    if (next.claim.empty() && next.writes.empty() && next.sends.empty() && next.verdicts.empty() &&
        next.quotas.empty() && !next.evict_idle && !next.unspent) {
      break;
    }
  }
  if (!finished_ && core_.next_wake() < armed_at_) timer_.cancel();
}

asio::awaitable<void> shard::timer_loop() {
  while (!core_.finished()) {
    armed_at_ = core_.next_wake();
    timer_.expires_at(armed_at_);
    co_await timer_.async_wait(use_tuple);
    if (core_.finished()) break;
    const auto now = read_clocks();
    if (now.steady < core_.next_wake()) continue;  // woken early, to re-arm sooner
    core_.on_timer(now);
    perform();
  }
}

// The coroutine keeps only what lives across the send: a frame over Asio's recycling limit
// (1,020 bytes) is a malloc and free of its own in every attempt.
asio::awaitable<void> shard::exchange(send_action send) {
  http_result result;
  try {
    wire_gate_of_attempt gate(*this, send.attempt);
    result =
        co_await client_.send(*send.target, send.request, &gate, send.identity, send.proxy.get());
  } catch (const std::exception& error) {
    result.error = proto::transport_error::protocol;
    result.detail = std::string("internal error: ") + error.what();
  }
  if (core_.finished()) co_return;
  core_.on_response(send.attempt, result, std::move(send.request), read_clocks());
  perform();
}

asio::awaitable<bool> shard::await_verdict(attempt_id attempt) {
  if (attempt >= verdicts_.size()) verdicts_.resize(attempt + 1);
  asio::steady_timer signal(io_, steady::time_point::max());
  verdicts_[attempt].signal = &signal;
  while (!verdicts_[attempt].go) co_await signal.async_wait(use_tuple);
  const bool go = *verdicts_[attempt].go;
  verdicts_[attempt] = {};
  co_return go;
}

}  // namespace surge::engine
