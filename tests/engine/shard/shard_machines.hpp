#pragma once
// The machines a shard's core owns (its rows, slots, demand and wakes), built for a test of one
// machine that acts on them (the settlement, the pump), with subscribers added and their rows
// claimed as a reload and a claim's answer bring them. The clock starts at t0 / unix0.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/shard/demand_planner.hpp"
#include "engine/shard/shard_actions.hpp"
#include "engine/shard/shard_rows.hpp"
#include "engine/shard/slots.hpp"
#include "engine/shard/subscriber.hpp"
#include "engine/shard/wakes.hpp"
#include "engine/subscriber_settings.hpp"
#include "engine/net/quota_lines.hpp"

namespace surge::engine::testing {

inline constexpr double unix0 = 1'700'000'000;

// A subscriber as a test adds it.
struct subscriber_spec {
  std::int64_t id = 7;
  double rate = 20;
  std::int64_t burst = 10;
  std::int64_t batch_max = 1;
  std::optional<proto::order_rule> order;
  std::string url = "http://partner.test/hook";
};

// A claimed row as a test claims it.
struct row_spec {
  std::size_t payload_bytes = 100;
  double lease = unix0 + 60;
  double created_at = unix0 - 10;
};

class shard_machines : public ::testing::Test {
 protected:
  using steady = std::chrono::steady_clock;

  // `in_flight_cap`: the shard's slots.
  explicit shard_machines(int in_flight_cap) : slots_(config_, in_flight_cap, t0) {}

  // A subscriber as a reload brings it, holding this process's share of its persisted bucket.
  subscriber_state& add(subscriber_spec spec) {
    storage::subscriber_row row;
    row.id = spec.id;
    row.url = std::move(spec.url);
    row.secret = "secret";
    row.rate_per_sec = spec.rate;
    row.burst = spec.burst;
    row.batch_max = spec.batch_max;
    row.order = std::move(spec.order);
    auto state =
        std::make_unique<subscriber_state>(row, derive_settings(row, config_), t0, unix0, config_);
    auto& sub = *state;
    sub.limits.allowance().ask(spec.rate, t0);
    sub.limits.allowance().granted(100, t0, std::chrono::seconds(0));
    subscribers_.emplace(spec.id, std::move(state));
    demand_.add(sub);
    slots_.recount_rates(subscribers_, t0);
    return sub;
  }

  // Rows `first` to `last` of `sub` claimed into its ready queue, as a claim's answer brings
  // them: JSON values, so they may join a batch.
  void claim(subscriber_state& sub, std::int64_t first, std::int64_t last, row_spec spec = {}) {
    std::vector<storage::claimed_row> claimed;
    for (auto id = first; id <= last; ++id) {
      storage::claimed_row row;
      row.id = id;
      row.subscriber_id = sub.settings.id;
      row.payload = '"' + std::string(spec.payload_bytes - 2, 'x') + '"';
      row.payload_bytes = static_cast<std::int64_t>(row.payload.size());
      row.created_at = spec.created_at;
      row.lease = spec.lease;
      claimed.push_back(std::move(row));
    }
    std::vector<subscriber_state*> joined;
    rows_.take_answer(claimed, subscribers_, false, joined);
  }

  shard_time at(steady::duration after) const {
    return {.steady = t0 + after, .wall = wall0 + after};
  }

  // The outcomes written since the last look, in order; the subscribers deactivated with them
  // go to deactivated_.
  std::vector<storage::outcome> written() {
    rows_.flush();
    std::vector<storage::outcome> out;
    for (auto& write : writes_) {
      for (auto& outcome : write.outcomes) out.push_back(outcome);
      for (const auto id : write.deactivate) deactivated_.push_back(id);
    }
    writes_.clear();
    return out;
  }

  // Writers arrive at the subscriber's gate until its burst is spent and one waits in line.
  void writer_waits_at_gate(subscriber_state& sub) {
    std::uint32_t writer = 90;
    while (sub.line.arrive({.attempt = writer, .give_up_at = t0 + std::chrono::hours(1)},
                           sub.limits.gate(false), t0)) {
      ASSERT_LT(++writer, 200u);
    }
    ASSERT_FALSE(sub.line.empty());
  }
  // How many subscribers' wire lines were queued to look again (and are looked at now).
  int lines_woken() {
    int woken = 0;
    wakes_.run_queued([&](subscriber_state&) { ++woken; }, [](subscriber_state&) {});
    return woken;
  }

  static quota_lines announced(std::string limit, std::string remaining, std::string reset) {
    return {{proto::quota_field::x_limit, std::move(limit)},
            {proto::quota_field::x_remaining, std::move(remaining)},
            {proto::quota_field::x_reset, std::move(reset)}};
  }

  const steady::time_point t0 = steady::time_point{} + std::chrono::hours(1);
  const std::chrono::system_clock::time_point wall0 =
      std::chrono::system_clock::time_point{} + std::chrono::seconds(1'700'000'000);
  scheduler_config config_;
  drain_metrics metrics_{1};
  std::vector<outcome_write> writes_;
  std::vector<std::int64_t> deactivated_;
  subscriber_map subscribers_;
  shard_rows rows_{config_, 1, metrics_.counters, writes_};
  demand_planner demand_{config_, subscribers_};
  shard_slots slots_;
  wake_schedule wakes_;
};

}  // namespace surge::engine::testing
