#pragma once
// The rows a shard holds and what becomes of each: taken in from a claim's answer into its
// subscriber's ready queue (counted against the shard's row budget and payload memory), and let
// go with an outcome (released, rescheduled, dead-lettered, coalesced, or settled by an attempt).
// The outcomes go to the storage thread in batches (an outcome_write each). Sans-I/O: the shard's
// core passes the time.
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/config.hpp"
#include "engine/handoff.hpp"
#include "engine/limits/payload_memory.hpp"
#include "engine/observe/counters.hpp"
#include "engine/shard/delivery.hpp"
#include "engine/shard/subscriber.hpp"
#include "storage/outcomes.hpp"

namespace surge::engine {

struct outcome_write {
  std::vector<storage::outcome> outcomes;
  std::vector<std::int64_t> deactivate;  // subscribers that answered 410 Gone
};

class shard_rows {
 public:
  // Full batches go to `writes` as they fill (scheduler.outcome_flush_rows) and the rest at
  // flush().
  shard_rows(const scheduler_config& config, int shard_count, drain_counters& counters,
             std::vector<outcome_write>& writes);

  // A claim's answer: each row joins its subscriber's ready queue, and that subscriber goes to
  // `joined` (once per row). A row of a subscriber unknown here, or any while the shard stops,
  // goes back.
  void take_answer(std::vector<storage::claimed_row>& rows, const subscriber_map& subscribers,
                   bool stopping, std::vector<subscriber_state*>& joined);
  // A claimed row nobody here can send goes back.
  void refuse(const storage::claimed_row& row);

  // Rows leave the ready queue for a request.
  void sent(int rows);
  // A request's row is over: its payload memory is free.
  void let_go(subscriber_state& sub, const storage::claimed_row& row) {
    memory_.hold(sub.payload, -static_cast<std::int64_t>(row.payload.size()));
  }
  // Rows of the ready queue, let go: back to the queue, due again at `next_attempt_at`, or dead.
  void release_ready(subscriber_state& sub);
  void release_front(subscriber_state& sub);
  void reschedule_ready(subscriber_state& sub, double next_attempt_at, const std::string& reason);
  void dead_letter_front(subscriber_state& sub, std::string reason, double now_unix);
  void dead_letter_all(subscriber_state& sub, const std::string& reason, double now_unix);
  // Of the ready rows sharing a key, only the newest stays (ready_rows.hpp: coalesce); the
  // others are done as coalesced.
  void coalesce_ready(subscriber_state& sub, double now_unix);

  // An attempt's row that was never written: due when the subscriber's pause ends, like the rows
  // buffered behind it, or back to the queue. No attempt is counted.
  void give_back_unsent(subscriber_state& sub, const storage::claimed_row& row,
                        std::chrono::steady_clock::time_point now, double now_unix);
  // An attempt's rows that were not sent, due again at `next_attempt_at`, their attempts as they
  // were.
  void retry_unsent(std::span<const storage::claimed_row> rows, double next_attempt_at,
                    const std::string& reason);

  // An attempt's outcome, counted by its kind.
  void settled(storage::outcome outcome);
  // The subscriber answered 410 Gone: written as inactive with the next batch.
  void deactivate(std::int64_t subscriber_id) { deactivate_.push_back(subscriber_id); }
  void flush();

  int buffered() const { return buffered_; }
  payload_memory& memory() { return memory_; }

 private:
  void adjust_buffered(int delta);
  // Into the next batch; a full batch goes to the writes.
  void push(storage::outcome outcome);

  std::size_t flush_rows_;
  drain_counters& counters_;
  std::vector<outcome_write>& writes_;
  int buffered_ = 0;       // rows in this shard's ready queues
  payload_memory memory_;  // this shard's part of scheduler.max_payload_memory
  std::vector<storage::outcome> outcomes_;
  std::vector<std::int64_t> deactivate_;
  std::vector<coalesced_row> coalesced_scratch_;
};

}  // namespace surge::engine
