#pragma once
// The storage core driven on a simulated clock, the way the storage thread drives it: the real
// executor (engine/storage_thread/storage_executor.hpp) performs the core's actions against a
// queue kept in memory (memory_drain_store.hpp), which can be told to fail the next calls of a
// kind or to refuse a row's outcome, and every answer to a shard, every notice and every log line
// is kept for the test to read.
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/observe/metrics.hpp"
#include "engine/storage_thread/storage_core.hpp"
#include "engine/storage_thread/storage_executor.hpp"
#include "tests/engine/recorded_log.hpp"
#include "tests/engine/storage_thread/memory_drain_store.hpp"

namespace surge::engine::testing {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// What one shard was told about its subscribers' ownership.
struct owner_notice {
  int shard = 0;
  std::vector<std::int64_t> subscribers;
  bool taken = false;
};

// A shard that keeps what the storage thread told it.
class recorded_shard final : public shard_endpoint {
 public:
  recorded_shard(int index, std::vector<storage_do::answer_shard>& answers,
                 std::vector<owner_notice>& owner_changes)
      : index_(index), answers_(answers), owner_changes_(owner_changes) {}
  void on_subscribers(std::vector<storage::subscriber_row>) override {}
  void on_claimed(claim_reply reply) override { answers_.push_back({index_, std::move(reply)}); }
  void on_new_rows(std::vector<std::int64_t>, bool) override {}
  void on_taken(std::vector<std::int64_t> ids) override {
    owner_changes_.push_back({index_, std::move(ids), true});
  }
  void on_disowned(std::vector<std::int64_t> ids) override {
    owner_changes_.push_back({index_, std::move(ids), false});
  }

 private:
  int index_;
  std::vector<storage_do::answer_shard>& answers_;
  std::vector<owner_notice>& owner_changes_;
};

class storage_simulation {
 public:
  // `prepare` sets the queue up before the start's first reload and renewal.
  explicit storage_simulation(storage_core_config config = default_config(), int shards = 1,
                              const std::function<void(memory_drain_store&)>& prepare = {})
      : config_(std::move(config)),
        core_(config_, shards, counters, log),
        start_(steady::time_point{} + 1000s),
        now_(start_),
        executor_({.until_drained = {.retry_wait = config_.until_drained_retry_wait}}, core_, store,
                  endpoints(shards), metrics, log,
                  {.steady = [this] { return now_; }, .wall = [this] { return unix_now(); }}) {
    executor_.on_drained = [this] { ++drained; };
    executor_.on_fatal = [this](std::string why) { stops.push_back(std::move(why)); };
    store.while_counting = [this] { now_ += count_takes; };
    if (prepare) prepare(store);
    core_.begin(now_);
    executor_.perform_due();
  }

  static storage_core_config default_config() {
    storage_core_config config;
    config.storage.db_path = "queue.db";
    config.storage.new_rows_check_interval = 0ms;
    return config;
  }

  // The queue, in memory.
  void add_rows(std::int64_t subscriber, int count, double due_in = -1) {
    for (int i = 0; i < count; ++i) {
      store.queue.add(
          {.id = next_id_++, .subscriber_id = subscriber, .next_attempt_at = unix_now() + due_in});
    }
  }
  double unix_now() const {
    return 1'800'000'000.0 + std::chrono::duration<double>(now_ - start_).count();
  }
  steady::time_point now() const { return now_; }
  storage_core& core() { return core_; }

  // Faults: the next `times` calls of `call` fail with `kind`.
  void fail(db_call call, storage::error::kind kind, int times = 1) {
    store.fail(call, kind, times);
  }
  // The database refuses an outcome of row `id` (as a done or retry; `even_dead`: as a dead too).
  void refuse(std::int64_t id, bool even_dead) { store.refuse(id, even_dead); }

  // Events from the shards.
  void ask(int shard, std::int64_t subscriber, int rows_wanted) {
    core_.claims_asked(shard, {{.subscriber_id = subscriber, .rows = rows_wanted}});
  }
  // Outcomes a shard settled for rows it was handed, all of one kind, counted as the shard
  // counts them (engine/shard/shard_rows.cpp) and held until hand_over().
  std::vector<storage::outcome> settle(const std::vector<storage::claimed_row>& sent,
                                       storage::outcome_kind kind = storage::outcome_kind::done) {
    std::vector<storage::outcome> outcomes;
    for (const auto& row : sent) {
      outcomes.push_back({.delivery_id = row.id, .lease = row.lease, .kind = kind});
    }
    const auto rows = static_cast<std::int64_t>(sent.size());
    counters.add(counters.outcomes_in_transit, rows);
    if (kind == storage::outcome_kind::done) counters.add(counters.delivered, rows);
    return outcomes;
  }
  // The shard's flush: the storage thread takes the outcomes in.
  void hand_over(std::vector<storage::outcome> outcomes) {
    core_.outcomes_submitted(std::move(outcomes), {});
  }
  // Outcomes settled and handed over at once.
  void submit(const std::vector<storage::claimed_row>& sent,
              storage::outcome_kind kind = storage::outcome_kind::done) {
    hand_over(settle(sent, kind));
  }

  // One round of the storage loop at the current time.
  void round() {
    core_.tick(now_);
    executor_.perform_due();
  }
  // Rounds every `step` for `total`, the way the storage loop wakes.
  void run_for(steady::duration total, steady::duration step = 5ms) {
    const auto end = now_ + total;
    while (now_ < end) {
      now_ += step;
      round();
    }
  }
  void advance(steady::duration by) { now_ += by; }

  // Queues `count` due rows for `subscriber`, has shard 0 ask for them in one round, and
  // returns the rows it was handed.
  std::vector<storage::claimed_row> claim_new(std::int64_t subscriber, int count) {
    add_rows(subscriber, count);
    ask(0, subscriber, count);
    round();
    return take_rows();
  }
  // The rows handed to shard `shard` since the last call.
  std::vector<storage::claimed_row> take_rows(int shard = 0) {
    std::vector<storage::claimed_row> out;
    for (auto& answer : answers) {
      if (answer.shard != shard) continue;
      for (auto& row : answer.reply.rows) out.push_back(std::move(row));
      answer.reply.rows.clear();
    }
    return out;
  }
  int rows_in(queue_row::state state) const { return store.queue.count(state); }

  // The finish the core ended with, if it has.
  const std::optional<storage_do::finish>& finished() const { return executor_.ended(); }
  const std::string& rescue_report() const { return executor_.rescue_report(); }

  drain_metrics metrics;
  steady::duration count_takes{0};  // how long each count of outstanding rows takes
  memory_drain_store store;         // the queue, and what was asked of it
  drain_counters& counters = metrics.counters;
  recorded_log log;
  // What the shards and the drain were told.
  std::vector<storage_do::answer_shard> answers;
  std::vector<owner_notice> owner_changes;  // in the order the shards were told
  std::vector<std::string> stops;
  int drained = 0;

 private:
  std::vector<shard_endpoint*> endpoints(int shards) {
    for (int i = 0; i < shards; ++i) shards_.emplace_back(i, answers, owner_changes);
    std::vector<shard_endpoint*> out;
    for (auto& shard : shards_) out.push_back(&shard);
    return out;
  }

  std::deque<recorded_shard> shards_;
  storage_core_config config_;
  storage_core core_;
  steady::time_point start_;
  steady::time_point now_;
  storage_executor executor_;
  std::int64_t next_id_ = 1;
};

}  // namespace surge::engine::testing
