#pragma once
// A shard's attempts by id, from the send to the result: what each carries (its rows, its
// subscriber and origin, the slots it holds) and the request it writes. Ids of ended attempts are
// reused, so a steady stream allocates nothing.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/shard/delivery.hpp"
#include "engine/shard/slots.hpp"
#include "engine/shard/subscriber.hpp"
#include "proto/signing.hpp"
#include "proto/target_policy.hpp"

namespace surge::engine {

using attempt_id = std::uint32_t;

struct attempt_state {
  subscriber_state* sub = nullptr;
  origin_state* origin = nullptr;
  attempt_rows rows;
  bool batched = false;
  bool probe = false;  // the one request an open circuit lets out
  // The token of its subscriber's allowance it took is refunded if its request never goes on the
  // wire: the shared bucket is charged only for what the partner counts.
  bool refundable = false;
  shard_slots::held slots;
  double started_unix = 0;
  // The rows' lease would run out before it could finish: it gives up at the wire gate then.
  std::chrono::steady_clock::time_point give_up_at{};
};

class attempt_book {
 public:
  attempt_id open() {
    if (free_.empty()) {
      attempts_.emplace_back();
      return static_cast<attempt_id>(attempts_.size() - 1);
    }
    const auto id = free_.back();
    free_.pop_back();
    return id;
  }
  attempt_state& operator[](attempt_id id) { return attempts_[id]; }
  // The attempt's result is settled: its id is free for the next.
  void close(attempt_id id) { free_.push_back(id); }

 private:
  std::vector<attempt_state> attempts_;
  std::vector<attempt_id> free_;
};

// What prepare_request needs of the drain's settings.
struct request_settings {
  std::string_view user_agent;
  // Time an attempt must have left on its rows' lease to finish within it (row_checks).
  std::chrono::duration<double> lease_margin{};
};

// Writes the attempt's request into `request` for `target`, signed with `signer`, and sets when
// it gives up at the wire gate: before its lease (the batch's shortest) gets too short to finish
// within it.
void prepare_request(attempt_state& attempt, std::string& request,
                     const std::shared_ptr<const proto::target>& target,
                     const proto::signer& signer, const request_settings& settings,
                     std::chrono::steady_clock::time_point now);

}  // namespace surge::engine
