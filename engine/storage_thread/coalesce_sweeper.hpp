#pragma once
// Coalescing across a subscriber's whole due backlog. The shard merges repeats among the rows it
// has claimed (engine/shard/ready_rows.hpp), but in a spike a key's repeats lie
// thousands of rows apart, further than any claim looks ahead. This thread, with its own
// connection, reads the due rows nobody holds of each coalescing subscriber now and then, applies
// the rule (proto/coalesce) and marks the rows it replaces, in short write transactions that never
// touch a leased row. A coalescing subscriber is claimed only up to what a sweep has judged
// (sweep_judgement), so the newest-only promise does not depend on how claims were paged.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "engine/observe/counters.hpp"
#include "engine/storage_thread/sweep_judgement.hpp"
#include "proto/id_set.hpp"
#include "storage/connection.hpp"
#include "storage/database.hpp"
#include "storage/queue_shape.hpp"

namespace surge::engine {

struct coalesce_sweeper_config {
  std::string db_path;
  std::optional<storage::queue_shape> shape;
  proto::id_set subscribers;
  std::chrono::milliseconds interval{1000};  // between sweeps
  int max_rows = 100'000;                    // rows read per subscriber and sweep
  // ... and payload bytes: what a sweep holds in memory is bounded whatever the rows carry.
  std::int64_t max_bytes = 64 * 1024 * 1024;
  int rows_per_transaction = 1000;  // the write lock is held this briefly
  // A keyed event is small; a bigger payload is sent as it is, never held by the sweep.
  std::int64_t max_payload_bytes = 64 * 1024;
  std::chrono::milliseconds busy_timeout{2000};
};

class coalesce_sweeper {
 public:
  // Each subscriber's judgement goes to `judgement` once its marks are committed.
  coalesce_sweeper(coalesce_sweeper_config config, drain_counters& counters,
                   sweep_judgement& judgement);
  ~coalesce_sweeper();  // stops and joins; a lock wait in progress is cut short
  coalesce_sweeper(const coalesce_sweeper&) = delete;
  coalesce_sweeper& operator=(const coalesce_sweeper&) = delete;

 private:
  void run();
  void sweep_once();

  coalesce_sweeper_config config_;
  drain_counters& counters_;
  sweep_judgement& judgement_;
  storage::interruptible_wait lock_wait_;
  // The sweeps' own connection, kept from one to the next (opening one each second cost a
  // PostgreSQL server a backend and a look at the catalog each time); dropped after a failure.
  std::optional<storage::connection> db_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace surge::engine
