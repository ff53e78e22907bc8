#pragma once
// What a shard asks the storage thread for (claim by demand: docs/design.md, "Claims and outcome
// writes"): the rotating scan over its subscribers, the shard's row budget and payload memory,
// the claim round, the idle-poll backoff of a subscriber whose claims come back short, and the
// tokens asked of (or given back to) the persisted buckets in the same message. At most one claim
// is outstanding. Pure state: the shard core passes the clock in, sends what plan() returns and
// hands the answer back.
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/config.hpp"
#include "engine/handoff.hpp"
#include "engine/limits/payload_memory.hpp"
#include "engine/shard/scheduling.hpp"
#include "engine/shard/subscriber.hpp"
#include "storage/claims.hpp"

namespace surge::engine {

class demand_planner {
 public:
  using clock = std::chrono::steady_clock;

  // `subscribers`: the shard's, by id, which the answers name.
  demand_planner(const scheduler_config& config, const subscriber_map& subscribers);

  // A new subscriber joins the end of the scan, due for a poll at once.
  void add(subscriber_state& sub);
  // The shard's subscribers in the order they came.
  std::span<subscriber_state* const> scan_order() const { return order_; }

  // The next claim: rows for the subscribers whose poll is due and that can use them soon,
  // within `row_room` rows less those asked and not yet answered and within `memory`, and tokens
  // for the subscribers about to send. Empty while a claim is outstanding or when nothing is
  // wanted; otherwise a claim is outstanding from now until answered().
  std::vector<storage::subscriber_demand> plan(int row_room, payload_memory& memory,
                                               clock::time_point now);
  bool outstanding() const { return outstanding_; }
  int pending_rows() const { return pending_total_; }

  // The answer came: what each subscriber asked settles. The rows are taken in after this and
  // counted into each one's rows_in_answer.
  void answered(const claim_reply& reply, payload_memory& memory);
  // After the rows are taken in: a subscriber whose answer came back short, with nothing more
  // due and no key freed, is polled less often. `got_rows`: those the answer brought rows to.
  void settle_polls(const claim_reply& reply, clock::time_point now,
                    std::vector<subscriber_state*>& got_rows);
  // The persisted buckets' grants (or, when the cycle did not run, their absence): `granted` is
  // each subscriber that received tokens.
  void take_grants(const claim_reply& reply, clock::time_point now, double now_unix,
                   std::vector<subscriber_state*>& granted);

  // Rows were queued for it, it was taken over or a key of it was freed: its idle backoff ends
  // and it is polled at the next plan.
  void poll_now(subscriber_state& sub, clock::time_point now);
  // Paused until `at`: no poll before then.
  void poll_no_earlier(subscriber_state& sub, clock::time_point at);
  // Tokens are asked for it, and given back once unspent for a lease, from now while it has rows,
  // a claim under way or tokens held or asked for.
  void watch_tokens(subscriber_state& sub);

 private:
  clock::time_point& poll_after_of(const subscriber_state& sub) {
    return poll_after_[sub.scan_index];
  }
  void plan_rows(int budget, payload_memory& memory, clock::time_point now,
                 std::vector<storage::subscriber_demand>& demand);
  void plan_tokens(clock::time_point now, std::vector<storage::subscriber_demand>& demand);
  subscriber_state* find(std::int64_t id) const;

  scheduling::demand_limits limits_;
  std::chrono::milliseconds idle_poll_min_;
  std::chrono::milliseconds idle_poll_max_;
  const subscriber_map& subscribers_;
  std::vector<subscriber_state*> order_;  // creation order, for the rotating scan
  // When each subscriber's idle poll is due, by scan_index. Kept apart from subscriber_state so
  // that the scan reads one array, not thousands of scattered objects, to pass over the
  // subscribers of a quiet table that are waiting for theirs.
  std::vector<clock::time_point> poll_after_;
  std::size_t cursor_ = 0;                  // where the last budget ran out
  std::vector<subscriber_state*> watched_;  // see watch_tokens
  struct round_candidate {
    subscriber_state* sub;
    int want;
  };
  std::vector<round_candidate> candidates_;  // plan_rows' scratch
  int pending_total_ = 0;                    // rows asked, not yet answered
  bool outstanding_ = false;
};

}  // namespace surge::engine
