#pragma once
// One reactor: an io_context on its own thread owning a slice of the subscribers (id % shards),
// their buckets, ready queues and connections. Nothing here is shared with other shards.
#include <atomic>
#include <deque>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "engine/config.hpp"
#include "engine/observe/counters.hpp"
#include "engine/memory/buffer_pool.hpp"
#include "engine/shard/delivery.hpp"
#include "engine/net/http_client.hpp"
#include "engine/observe/metrics.hpp"
#include "engine/limits/origin_limit.hpp"
#include "engine/shard/scheduling.hpp"
#include "engine/store/storage_worker.hpp"
#include "engine/shard/subscriber.hpp"
#include "proto/retry_policy.hpp"

namespace surge::engine {

// One host:port as a shard sees it: its adaptive concurrency limit, the attempts in flight to
// it, and the subscribers waiting for it to admit one more (FIFO).
struct origin_state {
  origin_state(const origin_limit_config& config, origin_limit::time_point now)
      : limit(config, now) {}
  origin_limit limit;
  int in_flight = 0;
  scheduling::slot_queue<subscriber_state> waiting;  // subscribers held back by `limit`
};

class shard final : public shard_endpoint {
 public:
  shard(int index, int shard_count, const drain_config& config, storage_worker& storage,
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
  using steady = std::chrono::steady_clock;

  void update_subscribers(std::vector<storage::subscriber_row> rows);
  void accept_claims(claim_reply reply);
  // Grants of the persisted buckets' tokens that came with a claim answer.
  void accept_tokens(const claim_reply& reply, steady::time_point now);
  boost::asio::awaitable<void> demand_loop();
  boost::asio::awaitable<void> flush_loop();
  boost::asio::awaitable<void> pump(subscriber_state& sub);
  // Takes the target and signer the pump saw, so a reload cannot change them mid-attempt.
  // `probe`: the one request an open circuit lets out.
  // `batched`: the rows go as one batch POST (build_batch_request), else the one row alone.
  boost::asio::awaitable<void> attempt(subscriber_state& sub, origin_state& origin,
                                       attempt_rows rows, bool batched,
                                       std::shared_ptr<const proto::target> target,
                                       std::shared_ptr<const proto::signer> signer, bool probe,
                                       origin_limit::ticket origin_ticket);
  // Writes the attempt's request into `request`; returns when the wire gate gives up (the lease
  // would run out before the attempt could finish).
  steady::time_point prepare_request(std::string& request, subscriber_state& sub,
                                     const std::shared_ptr<const proto::target>& target,
                                     const proto::signer& signer, const attempt_rows& rows,
                                     bool batched, double started_unix);
  // Everything an attempt's result changes once the send is over: its outcome, the
  // subscriber's state, the in-flight counts.
  void settle_attempt(subscriber_state& sub, origin_state& origin, const attempt_rows& rows,
                      bool batched, const http_result& result, double started_unix, bool probe,
                      origin_limit::ticket origin_ticket);
  // A batch the partner refused as too large (proto::batch_rows_after): its rows are due again
  // at once, unattempted, and the subscriber's batches are at most `fits` rows from now on.
  void split_refused_batch(subscriber_state& sub, const attempt_rows& rows,
                           const storage::outcome& judged, const storage::claimed_row& lead,
                           int fits, const attempt_times& times);
  // The subscriber's request head for `target`, built again only when the target changed.
  std::string_view request_head_for(subscriber_state& sub,
                                    const std::shared_ptr<const proto::target>& target);
  // Batches and coalescing (batching_and_coalescing.cpp). The rows the next request takes from
  // the front of the ready queue: the front row alone, or as many as the subscriber's batch
  // allows.
  attempt_rows take_request_rows(subscriber_state& sub, bool& batched);
  // Whether the ready rows make a full batch, or the next one cannot join it (so waiting for
  // more rows would not make the batch bigger).
  bool batch_full(const subscriber_state& sub) const;
  // Whether `row` may join a batch of `rows` rows with `payload_bytes` of payload so far.
  bool may_join_batch(const subscriber_state& sub, const storage::claimed_row& row, int rows,
                      std::int64_t payload_bytes, bool check_json) const;
  // Applies the subscriber's coalescing rule to its ready queue: replaced rows end done.
  void coalesce_ready(subscriber_state& sub);
  // The facts scheduling::next_pump_step decides on, and the send it may decide.
  scheduling::pump_facts pump_facts_of(subscriber_state& sub, steady::time_point now,
                                       double now_unix);
  void send_next(subscriber_state& sub, steady::time_point now);
  void send_demand();
  // The facts scheduling::wants_tokens decides on.
  scheduling::token_facts token_facts_of(const subscriber_state& sub, steady::time_point now) const;
  // Puts the subscriber on the token watch, which the demand scan visits for token asks and
  // returns; it stays there while token_watch_needed says so.
  void watch_tokens(subscriber_state& sub);
  static bool token_watch_needed(const subscriber_state& sub);
  // The subscriber's entry in poll_after_, to read or set.
  steady::time_point& poll_after_of(const subscriber_state& sub) {
    return poll_after_[sub.scan_index];
  }
  void wake_subscribers(const std::vector<std::int64_t>& ids, bool all);
  void dead_letter(storage::claimed_row row, std::string reason);
  void release_ready(subscriber_state& sub);
  void reschedule_ready(subscriber_state& sub, double next_attempt_at, std::string reason);
  void push_outcome(storage::outcome outcome);
  void adjust_buffered(int delta);
  // A row the shard held (buffered or in flight) has ended: its payload is no longer held.
  void let_go(const storage::claimed_row& row) {
    held_bytes_ -= static_cast<std::int64_t>(row.payload.size());
  }
  // How many more rows the shard may ask for within its share of max_payload_memory.
  int rows_within_memory() const;
  // How long a lease must still run for an attempt to start (or to be written) within it.
  std::chrono::duration<double> lease_margin() const;
  bool lease_too_short(const storage::claimed_row& row, double now_unix) const;
  // delivery_refusal, and on a seed001 queue also a row past its retry window since enqueue:
  // that shape attempts nothing later, whoever scheduled the row.
  std::string refusal_of(const storage::claimed_row& row, double now_unix) const;
  // An attempt that gave up at the wire gate: its row goes back, no attempt counted.
  void give_back_unsent(subscriber_state& sub, const storage::claimed_row& row);
  void count_outcome(storage::outcome_kind kind);
  // In-flight bookkeeping once an attempt is over, written or not.
  void attempt_ended(subscriber_state& sub, origin_state& origin, origin_limit::ticket ticket);
  // Counters, metrics and the subscriber's failure streak for one finished attempt.
  void record_attempt(subscriber_state& sub, std::span<const storage::claimed_row> rows,
                      const http_result& result, const attempt_times& times);
  // Feeds an attempt's result to the subscriber's circuit breaker and adaptive rate.
  void observe_endpoint(subscriber_state& sub, const http_result& result);
  // The partner's announced quota (announced_quota.cpp): the pace it sets, until its window resets.
  void observe_quota(subscriber_state& sub, const http_result& result, const attempt_times& times);
  // The configured limit again once the announced window has reset.
  void expire_quota_limit(subscriber_state& sub, steady::time_point now);
  // Nothing goes out for `pause` (Retry-After, a spent quota); a long pause gives the buffered
  // rows back, due at its end, with `reason`.
  void pause_subscriber(subscriber_state& sub, steady::duration pause, double now_unix,
                        const char* reason);
  static std::optional<announced_snapshot> announced_of(const subscriber_state& sub,
                                                        std::chrono::system_clock::time_point now);
  // Announcements not yet recorded go to the storage thread, for `surge stats`.
  void hand_over_quotas();
  void flush_outcomes();
  void slot_freed(subscriber_state& sub, origin_state& origin);
  // Wakes as many subscribers at the head of the origin's queue as it now admits.
  void wake_origin_waiters(origin_state& origin);
  // The origin of the subscriber's current target; settings.target must be set.
  origin_state& origin_of(subscriber_state& sub);
  void finish();
  void finish_if_quiet();
  void publish_metrics();

  int index_;
  int shard_count_;
  drain_config config_;
  proto::retry_policy retry_policy_;
  storage_worker& storage_;
  drain_metrics& metrics_;
  drain_counters& counters_;
  boost::asio::io_context io_{1};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  http_client client_;
  client_identities identities_;  // the client certificates of this shard's subscribers
  buffer_pool request_buffers_;
  std::thread thread_;

  std::unordered_map<std::int64_t, std::unique_ptr<subscriber_state>> subscribers_;
  std::vector<subscriber_state*> order_;  // creation order, for the rotating demand scan
  // When each subscriber's idle poll is due, by scan_index. Kept apart from subscriber_state so
  // that the scan reads one array, not thousands of scattered objects, to pass over the
  // subscribers of a quiet table that are waiting for theirs.
  std::vector<steady::time_point> poll_after_;
  std::size_t demand_cursor_ = 0;
  std::vector<subscriber_state*> token_watch_;  // see watch_tokens
  // send_demand's scratch, kept for its storage.
  struct round_candidate {
    subscriber_state* sub;
    int want;
  };
  std::vector<round_candidate> round_candidates_;
  scheduling::slot_queue<subscriber_state> waiting_for_slot_;  // each subscriber at most once
  std::unordered_map<std::string, std::unique_ptr<origin_state>> origins_;  // by origin_key
  int in_flight_ = 0;
  int in_flight_cap_;
  bool claim_outstanding_ = false;
  int buffered_ = 0;  // rows in this shard's ready queues
  // Payload bytes of the rows in the ready queues and in flight (scheduler.max_payload_memory).
  std::int64_t held_bytes_ = 0;
  // Payload bytes per claimed row, for turning the free bytes into rows to ask for: the most a
  // row may carry until an answer shows what rows carry here.
  double bytes_per_row_ = 0;
  int pending_total_ = 0;  // rows asked of the storage thread, not yet answered
  bool stopping_ = false;
  std::vector<storage::outcome> outcomes_;
  std::vector<std::int64_t> deactivate_;
  std::mt19937_64 rng_;
  std::atomic<bool> finished_{false};
};

}  // namespace surge::engine
