#pragma once
// A shard's core driven on a simulated clock, the way its reactor drives it: the queue it claims
// from is kept in memory (tests/engine/simulated_queue.hpp: rows due by time, leased when claimed,
// their outcomes fenced and applied as the storage thread would apply them; a row whose lease
// runs out with no outcome fails the test), a persisted bucket grants what is asked, and the
// partner answers each request it is sent after a latency the test sets. Every request is read
// back from the bytes the core built, so the partner sees what would go on the wire.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "engine/shard/core.hpp"
#include "engine/storage_thread/commit_timing.hpp"
#include "storage/ordered_claim.hpp"
#include "tests/engine/simulated_queue.hpp"
#include "tests/engine/recorded_log.hpp"

namespace surge::engine::testing {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// One request as the partner received it.
struct received {
  std::int64_t subscriber = 0;
  std::vector<std::int64_t> rows;  // the delivery ids it carries
  int attempt = 0;                 // X-VVV-Attempt
  steady::time_point at{};
  bool fresh_connection = false;  // the first request on a new connection
};

// The partner's answer to one request.
struct answer {
  int status = 200;
  std::string retry_after;
  steady::duration latency = 20ms;
  // Set: no answer, the client's failure instead (status is then ignored).
  proto::transport_error error = proto::transport_error::none;
  std::string detail;
  quota_lines quota;  // the quota header lines it announces, if any
};

// The most requests in any window of `window` among `sent`, which must be in time order.
inline int most_in_window(const std::vector<received>& sent, steady::duration window) {
  int most = 0;
  std::size_t first = 0;
  for (std::size_t last = 0; last < sent.size(); ++last) {
    while (sent[last].at - sent[first].at >= window) ++first;
    most = std::max(most, static_cast<int>(last - first + 1));
  }
  return most;
}

inline std::int64_t header_number(std::string_view request, std::string_view name) {
  const auto at = request.find(std::string("\r\n").append(name).append(": "));
  if (at == std::string_view::npos) return -1;
  std::int64_t value = -1;
  const auto begin = request.data() + at + name.size() + 4;
  std::from_chars(begin, request.data() + request.size(), value);
  return value;
}

inline std::vector<std::int64_t> delivery_ids(std::string_view request) {
  if (const auto one = header_number(request, "X-VVV-Delivery-Id"); one >= 0) return {one};
  const std::string_view name = "\r\nX-VVV-Delivery-Ids: ";
  const auto at = request.find(name);
  std::vector<std::int64_t> ids;
  if (at == std::string_view::npos) return ids;
  auto line = request.substr(at + name.size());
  line = line.substr(0, line.find("\r\n"));
  std::int64_t value = 0;
  bool in_number = false;
  for (const char c : line) {
    if (c >= '0' && c <= '9') {
      value = value * 10 + (c - '0');
      in_number = true;
    } else if (in_number) {
      ids.push_back(value);
      value = 0;
      in_number = false;
    }
  }
  if (in_number) ids.push_back(value);
  return ids;
}

class simulation {
 public:
  // The first of `shard_count` shards: each takes its part of the drain's in-flight cap and
  // payload memory.
  explicit simulation(drain_config config = default_config(), int shard_count = 1)
      : config_(std::move(config)),
        metrics_(1),
        now_{steady::time_point{} + 1000s,
             std::chrono::system_clock::time_point{} + std::chrono::seconds(1'800'000'000)},
        core_(0, shard_count, config_, metrics_, log_, 7, now_) {}

  static drain_config default_config() {
    drain_config config;
    config.http.attempt_timeout = 2s;
    return config;
  }

  static storage::subscriber_row subscriber(std::int64_t id, double rate, std::int64_t burst) {
    storage::subscriber_row row;
    row.id = id;
    row.url = "http://partner.test/hook/" + std::to_string(id);
    row.secret = "test-secret";
    row.rate_per_sec = rate;
    row.burst = burst;
    row.tokens = static_cast<double>(burst);
    row.tokens_updated_at = 0;
    return row;
  }

  void load(std::vector<storage::subscriber_row> rows) {
    std::vector<identity_lookup> identities(rows.size());
    core_.on_subscribers(std::move(rows), std::move(identities), now_);
    perform();
  }

  // Queues a row due now (or `after` from now); returns its id.
  std::int64_t enqueue(std::int64_t subscriber, std::string payload = R"({"clip":1})",
                       std::string event_type = "clip.viral",
                       steady::duration after = steady::duration::zero()) {
    storage::claimed_row row;
    row.id = next_row_id_++;
    row.subscriber_id = subscriber;
    row.event_type = std::move(event_type);
    row.payload_bytes = static_cast<std::int64_t>(payload.size());
    row.payload = std::move(payload);
    row.created_at = unix_now();
    row.next_attempt_at = unix_now() + std::chrono::duration<double>(after).count();
    return queue.add(std::move(row));
  }

  // Runs the core until `end`: its timers, claim answers a storage round trip later, and the
  // partner's answers.
  void run_until(steady::time_point end) {
    for (int steps = 0; steps < 5'000'000; ++steps) {
      auto next = core_.next_wake();
      if (!events_.empty()) next = std::min(next, events_.begin()->first);
      if (next > end) {
        move_to(end);
        return;
      }
      move_to(std::max(next, now_.steady));
      if (!events_.empty() && events_.begin()->first <= now_.steady) {
        auto event = std::move(events_.begin()->second);
        events_.erase(events_.begin());
        event();
      } else {
        ++timer_wakes;
        core_.on_timer(now_);
      }
      perform();
    }
    FAIL() << "the simulation did not reach its end";
  }
  void run_for(steady::duration span) { run_until(now_.steady + span); }
  // What the core last published for the operator (once a simulated second).
  const drain_metrics& metrics() const { return metrics_; }
  // Every line the core said, in order.
  const recorded_log& log() const { return log_; }
  // Runs until `done` holds, at most `limit`; true if it came to hold.
  bool run_until(const std::function<bool()>& done, steady::duration limit) {
    const auto end = now_.steady + limit;
    while (!done() && now_.steady < end) run_until(std::min(end, now_.steady + 10ms));
    return done();
  }

  void begin_stop() {
    core_.begin_stop(now_);
    perform();
  }
  void abandon() {
    core_.abandon(now_);
    perform();
  }
  void new_rows(const std::vector<std::int64_t>& subscribers) {
    core_.on_new_rows(subscribers, false, now_);
    perform();
  }

  bool all_rows(queue_row::state state) const { return queue.all(state); }
  int count_rows(queue_row::state state) const { return queue.count(state); }
  std::vector<received> requests_of(std::int64_t subscriber) const {
    std::vector<received> out;
    for (const auto& r : requests) {
      if (r.subscriber == subscriber) out.push_back(r);
    }
    return out;
  }
  double unix_now() const { return now_.unix_seconds(); }
  steady::time_point now() const { return now_.steady; }
  shard_core& core() { return core_; }
  const drain_config& config() const { return config_; }

  // What the partner answers each request; 200 after 20 ms unless set.
  std::function<answer(const received&)> partner = [](const received&) { return answer{}; };
  // How long the n-th request (from 0) takes to get its connection before it asks to write.
  std::function<steady::duration(int)> connect_delay = [](int) { return steady::duration{}; };
  // Whether the n-th request's first write finds its kept-alive connection closed by the
  // partner: it never arrives, and the client retries it once on a new connection, asking the
  // wire gate again.
  std::function<bool(int)> stale_connection = [](int) { return false; };
  steady::duration storage_round_trip = 2ms;
  // Set: outcomes are written on the storage thread's commit timing, not as soon as handed over.
  std::optional<commit_timing> commits;
  simulated_queue queue;
  std::vector<received> requests;
  std::vector<std::vector<storage::subscriber_demand>> claims;  // every claim the core asked
  std::vector<storage::outcome> outcomes;                       // every outcome it wrote
  std::vector<std::int64_t> deactivated;
  std::vector<storage::partner_quota_row> quotas;
  std::optional<std::vector<storage::unspent_tokens>> unspent;
  int gave_up_at_gate = 0;
  int evictions = 0;    // times the core asked for idle connections to be closed
  int timer_wakes = 0;  // times the core was woken for a time next_wake() named

 private:
  void move_to(steady::time_point t) {
    const auto step = t - now_.steady;
    now_.steady = t;
    now_.wall += std::chrono::duration_cast<std::chrono::system_clock::duration>(step);
  }

  // As the reactor does (shard::perform): an event that comes back while actions are being
  // performed (a write answered at once, a gate that gave up) adds to the core's list, and the
  // loop takes it on its next pass; nothing is asked once the core has handed back its tokens.
  void perform() {
    if (performing_) return;
    performing_ = true;
    for (int rounds = 0; rounds < 100'000; ++rounds) {
      shard_actions out;
      std::swap(out, core_.actions());
      if (out.claim.empty() && out.writes.empty() && out.sends.empty() && out.verdicts.empty() &&
          out.quotas.empty() && !out.evict_idle && !out.unspent) {
        performing_ = false;
        return;
      }
      EXPECT_FALSE(unspent.has_value()) << "an action after the core finished";
      if (!out.claim.empty()) {
        claims.push_back(out.claim);
        events_.emplace(now_.steady + storage_round_trip,
                        [this, demand = std::move(out.claim)] { answer_claim(demand); });
      }
      for (auto& write : out.writes) {
        if (commits) {
          hold(std::move(write.outcomes));
          write.outcomes.clear();
        }
        for (auto& o : write.outcomes) apply(o);
        deactivated.insert(deactivated.end(), write.deactivate.begin(), write.deactivate.end());
      }
      quotas.insert(quotas.end(), out.quotas.begin(), out.quotas.end());
      if (out.evict_idle) ++evictions;
      for (const auto& verdict : out.verdicts) {
        if (verdict.go) {
          passed(verdict.attempt);
        } else {
          not_sent(verdict.attempt);
        }
      }
      for (auto& send : out.sends) {
        const auto id = send.attempt;
        in_flight_[id] = std::move(send.request);
        send_number_[id] = sends_;
        const auto delay = connect_delay(sends_++);
        // A request that waited for its connection writes first on a new one.
        fresh_[id] = delay != steady::duration::zero();
        if (delay == steady::duration::zero()) {
          ready_to_write(id);
        } else {
          events_.emplace(now_.steady + delay, [this, id] { ready_to_write(id); });
        }
      }
      if (out.unspent) unspent = std::move(out.unspent);
    }
    FAIL() << "the core kept asking for more";
  }

  // Outcomes held as the storage thread holds them (engine/storage_thread/commit_timing.hpp),
  // written with a claim when due then, or at the commit interval.
  void hold(std::vector<storage::outcome> written) {
    if (held_.empty()) {
      events_.emplace(now_.steady + commits->interval, [this] { commit(); });
    }
    std::move(written.begin(), written.end(), std::back_inserter(held_));
  }
  void commit() {
    for (const auto& o : held_) apply(o);
    held_.clear();
    last_commit_ = now_.steady;
  }

  void answer_claim(const std::vector<storage::subscriber_demand>& demand) {
    if (commits) {
      const bool frees_key = std::any_of(held_.begin(), held_.end(),
                                         [](const storage::outcome& o) { return o.frees_key; });
      if (outcomes_due(*commits, held_.size(), false, now_.steady - last_commit_, false,
                       frees_key)) {
        commit();
      }
    }
    claim_reply reply;
    reply.asked = demand;
    for (const auto& asked : demand) {
      if (asked.tokens > 0) {
        reply.granted.push_back({.subscriber_id = asked.subscriber_id, .tokens = asked.tokens});
      }
      if (asked.order) {
        claim_ordered(asked, reply);
        continue;
      }
      auto taken = queue.take(asked.subscriber_id, asked.rows, unix_now(), unix_now() + 60);
      reply.rows.insert(reply.rows.end(), taken.rows.begin(), taken.rows.end());
      if (taken.more_due) reply.more_due.push_back(asked.subscriber_id);
    }
    // The core releases a row before its lease runs short: a lapsed one was leaked.
    EXPECT_EQ(queue.lapsed_and_claimed_again, 0) << "a row's lease ran out with no outcome";
    core_.on_claimed(std::move(reply), now_);
  }

  // An ordered subscriber's claim, by the storage's own walk over its unfinished rows.
  void claim_ordered(const storage::subscriber_demand& asked, claim_reply& reply) {
    const std::set<std::string, std::less<>> stopped;
    storage::ordered_reader reader{
        .payload_cap = INT64_MAX,
        .page =
            [&](std::int64_t after, std::int64_t limit,
                std::vector<storage::unfinished_row>& page) {
              for (auto it = queue.rows.upper_bound(after);
                   it != queue.rows.end() && static_cast<std::int64_t>(page.size()) < limit; ++it) {
                const auto& queued = it->second;
                if (queued.row.subscriber_id != asked.subscriber_id) continue;
                if (!simulated_queue::unfinished(queued)) continue;
                page.push_back({.row = queued.row,
                                .due = queued.row.next_attempt_at <= unix_now(),
                                .free = simulated_queue::free_at(queued, unix_now())});
              }
            },
        .payload_of = [&](std::int64_t id) { return queue.rows.at(id).row.payload; }};
    auto pick = storage::pick_key_heads(asked, stopped, reader);
    for (auto& row : pick.rows) {
      auto& queued = queue.rows.at(row.id);
      queue.lease(queued, unix_now() + 60);
      row.lease = queued.row.lease;
      reply.rows.push_back(std::move(row));
    }
    if (pick.more_due) reply.more_due.push_back(asked.subscriber_id);
  }

  void apply(const storage::outcome& o) {
    outcomes.push_back(o);
    EXPECT_TRUE(queue.holds_lease(o))
        << "an outcome for row " << o.delivery_id << " with lease " << o.lease
        << ", which the row does not hold (" << queue.rows.at(o.delivery_id).row.lease << ")";
    if (queue.holds_lease(o)) queue.apply(o);
  }

  void ready_to_write(attempt_id id) {
    const auto go = core_.on_write_ready(id, fresh_.at(id), now_);
    if (go && *go) passed(id);
    if (go && !*go) not_sent(id);
    perform();
  }

  // The gate let the write go: it arrives, or its stale connection sends it to the one retry.
  void passed(attempt_id id) {
    if (!fresh_.at(id) && stale_connection(send_number_.at(id))) {
      fresh_[id] = true;
      retried_.insert(id);
      events_.emplace(now_.steady + 1ms, [this, id] { ready_to_write(id); });
      return;
    }
    written(id, fresh_.at(id));
  }

  void written(attempt_id id, bool fresh_connection) {
    const auto& request = in_flight_.at(id);
    received r{.subscriber = header_number(request, "X-VVV-Subscriber"),
               .rows = delivery_ids(request),
               .attempt = static_cast<int>(header_number(request, "X-VVV-Attempt")),
               .at = now_.steady,
               .fresh_connection = fresh_connection};
    requests.push_back(r);
    const auto reply = partner(r);
    events_.emplace(now_.steady + reply.latency, [this, id, reply] {
      http_result result;
      result.status = reply.error == proto::transport_error::none ? reply.status : 0;
      result.error = reply.error;
      result.detail = reply.detail;
      result.retry_after = reply.retry_after;
      result.quota = reply.quota;
      result.exchange_time = reply.latency;
      respond(id, result);
    });
  }

  void not_sent(attempt_id id) {
    ++gave_up_at_gate;
    http_result result;
    if (retried_.contains(id)) {
      // As the client does: on the fresh retry, the first write's failure stands.
      result.error = proto::transport_error::reset_before_response;
      result.detail = "the kept-alive connection was closed";
    } else {
      result.not_sent = true;
    }
    respond(id, result);
  }

  void respond(attempt_id id, const http_result& result) {
    auto request = std::move(in_flight_.at(id));
    in_flight_.erase(id);
    core_.on_response(id, result, std::move(request), now_);
    perform();
  }

  drain_config config_;
  drain_metrics metrics_;
  recorded_log log_;
  shard_time now_;
  shard_core core_;
  std::int64_t next_row_id_ = 1;
  int sends_ = 0;
  std::multimap<steady::time_point, std::function<void()>> events_;
  std::vector<storage::outcome> held_;  // with `commits`: handed over, not yet written
  steady::time_point last_commit_{};
  std::map<attempt_id, std::string> in_flight_;
  std::map<attempt_id, bool> fresh_;
  std::map<attempt_id, int> send_number_;
  std::set<attempt_id> retried_;  // on the fresh retry after a stale connection
  bool performing_ = false;
};

}  // namespace surge::engine::testing
