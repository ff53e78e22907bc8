// Rules the drain's process tests used to prove with real time, proved here on the shard core's
// simulated clock (core_simulation.hpp): pushback, batches under failure, a limit that counts
// requests, settings changed while draining, a row that would inject, hanging requests at one
// origin, and the process-wide in-flight cap. Each runs simulated seconds in milliseconds.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "engine/observe/metrics_text.hpp"
#include "engine/shard/core.hpp"
#include "tests/engine/shard/core_simulation.hpp"

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using testing::answer;
using testing::most_in_window;
using testing::queue_row;
using testing::received;
using testing::simulation;
using steady = std::chrono::steady_clock;

// The most requests open at once, each open from when it was written for `latency`.
int most_open(const std::vector<received>& sent, steady::duration latency) {
  std::vector<std::pair<steady::time_point, int>> edges;
  for (const auto& r : sent) {
    edges.emplace_back(r.at, 1);
    edges.emplace_back(r.at + latency, -1);
  }
  std::sort(edges.begin(), edges.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second < b.second;
  });
  int open = 0, most = 0;
  for (const auto& [at, step] : edges) most = std::max(most, open += step);
  return most;
}

// A partner that accepts 20 requests a second from a subscriber configured for 100 and answers
// the rest 429 with "Retry-After: 0", so pausing does not help: pushback brings the pace down
// to about what it accepts instead of sending at the configured rate into a wall of 429s.
TEST(ShardCorePartner, PushbackBringsThePaceDownToWhatThePartnerAccepts) {
  simulation sim;
  steady::time_point accepted_at{};
  sim.partner = [&](const received& r) {
    if (r.at - accepted_at >= 50ms) {
      accepted_at = r.at;
      return answer{};
    }
    return answer{.status = 429, .retry_after = "0"};
  };
  sim.load({simulation::subscriber(1, 100.0, 10)});
  for (int i = 0; i < 2000; ++i) sim.enqueue(1);
  const auto start = sim.now();
  sim.run_for(14s);
  // After a few seconds to adapt, the second half of the run, judged by the partner's rule.
  int accepted = 0, refused = 0;
  steady::time_point last{};
  for (const auto& r : sim.requests) {
    const bool ok = r.at - last >= 50ms;
    if (ok) last = r.at;
    if (r.at >= start + 7s) (ok ? accepted : refused) += 1;
  }
  EXPECT_LE(refused, accepted / 5)
      << "still pushing far above what the partner accepts: " << accepted << " accepted, "
      << refused << " refused";
  EXPECT_GE(accepted, 7 * 20 / 2) << "backed off far below what the partner accepts";
}

// A failing batch goes again as the same batch, after its backoff, and its rows are done only
// after the 2xx, each with two attempts.
TEST(ShardCorePartner, AFailingBatchGoesAgainAsAUnitAndIsDoneOnlyAfterA2xx) {
  simulation sim;
  std::set<std::vector<std::int64_t>> failed;
  sim.partner = [&](const received& r) {
    return answer{.status = failed.insert(r.rows).second ? 500 : 200};
  };
  auto row = simulation::subscriber(1, 100.0, 3);
  row.batch_max = 10;
  sim.load({row});
  for (int i = 0; i < 40; ++i) sim.enqueue(1);
  ASSERT_TRUE(sim.run_until([&] { return sim.all_rows(queue_row::state::done); }, 60s));
  std::map<std::vector<std::int64_t>, std::vector<received>> by_batch;
  for (const auto& r : sim.requests) by_batch[r.rows].push_back(r);
  EXPECT_GE(by_batch.size(), 4u);
  for (const auto& [ids, tries] : by_batch) {
    ASSERT_EQ(tries.size(), 2u) << "batch starting " << ids.front();
    EXPECT_EQ(tries[0].attempt, 1);
    EXPECT_EQ(tries[1].attempt, 2);
    // Equal jitter on a 1 s base: at least half of it after the first answer (20 ms).
    EXPECT_GE(tries[1].at - tries[0].at, 500ms + 20ms);
  }
  for (const auto& [id, queued] : sim.queue.rows) {
    EXPECT_EQ(queued.outcomes,
              (std::vector{storage::outcome_kind::retry, storage::outcome_kind::done}))
        << "row " << id;
  }
  for (const auto& o : sim.outcomes) {
    if (o.kind == storage::outcome_kind::done) {
      EXPECT_EQ(o.attempts, 2) << o.delivery_id;
    }
  }
}

// A batch stays within its byte cap, and a payload that is not JSON (it cannot be an element of
// the array) goes alone.
TEST(ShardCorePartner, TheByteCapHoldsAndAPayloadThatIsNotJsonGoesAlone) {
  simulation sim;
  auto row = simulation::subscriber(1, 500.0, 20);
  row.batch_max = 50;
  row.batch_bytes = 1000;
  sim.load({row});
  for (int i = 0; i < 60; ++i) {
    sim.enqueue(
        1, R"({"n":)" + std::to_string(100 + i) + R"(,"pad":")" + std::string(80, 'x') + R"("})");
  }
  const auto odd = sim.enqueue(1, "not json, sent as it is");
  ASSERT_TRUE(sim.run_until([&] { return sim.all_rows(queue_row::state::done); }, 30s));
  std::size_t largest = 0;
  int carrying_odd = 0;
  for (const auto& r : sim.requests) {
    if (std::find(r.rows.begin(), r.rows.end(), odd) != r.rows.end()) {
      ++carrying_odd;
      EXPECT_EQ(r.rows, std::vector<std::int64_t>{odd}) << "it went alone";
      continue;
    }
    std::size_t body = 1;  // "[", a comma between payloads, "]"
    for (const auto id : r.rows) body += sim.queue.rows.at(id).row.payload.size() + 1;
    EXPECT_LE(body, 1000u) << "batch starting " << r.rows.front();
    largest = std::max(largest, r.rows.size());
  }
  EXPECT_EQ(carrying_odd, 1);
  EXPECT_GE(largest, 8u) << "about 100-byte payloads: 9 fit under 1000 bytes";
}

// A batch subscriber's limit counts POSTs, not the rows they carry.
TEST(ShardCorePartner, ABatchSubscribersLimitCountsRequestsNotRows) {
  simulation sim;
  auto row = simulation::subscriber(1, 4.0, 2);
  row.batch_max = 10;
  row.batch_linger = 0.2;
  sim.load({row});
  for (int i = 0; i < 150; ++i) sim.enqueue(1);
  ASSERT_TRUE(sim.run_until([&] { return sim.all_rows(queue_row::state::done); }, 60s));
  EXPECT_LE(most_in_window(sim.requests, 1s), 2 + 4);
  EXPECT_LE(most_in_window(sim.requests, 2s), 2 + 8);
  EXPECT_EQ(sim.requests.size(), 150u / 10) << "full batches, one token each";
}

// Batching turned on while a subscriber drains (the storage thread's periodic reload) applies
// without a restart: single requests before, batches after.
TEST(ShardCorePartner, ABatchSettingChangedWhileDrainingAppliesWithoutARestart) {
  simulation sim;
  auto row = simulation::subscriber(1, 8.0, 1);
  sim.load({row});
  for (int i = 0; i < 120; ++i) sim.enqueue(1);
  sim.run_for(1s);
  const auto before = sim.requests.size();
  ASSERT_GE(before, 5u);
  for (const auto& r : sim.requests) EXPECT_EQ(r.rows.size(), 1u);
  row.batch_max = 20;
  sim.load({row});
  ASSERT_TRUE(sim.run_until([&] { return sim.all_rows(queue_row::state::done); }, 60s));
  std::size_t batches_after = 0;
  for (std::size_t i = before; i < sim.requests.size(); ++i) {
    batches_after += sim.requests[i].rows.size() > 1;
  }
  EXPECT_GE(batches_after, 1u);
  EXPECT_EQ(sim.count_rows(queue_row::state::done), 120);
}

// A rate changed in the table reaches the shard with the next reload and applies at once, with
// no restart: at the old 4/s the 60 rows would take 15 s; at 40/s the rest go in under 2 s, and
// no second after the change carries more than the new limit allows.
TEST(ShardCorePartner, ARateChangedInTheTableAppliesAtTheNextReload) {
  simulation sim;
  auto row = simulation::subscriber(1, 4.0, 1);
  sim.load({row});
  for (int i = 0; i < 60; ++i) sim.enqueue(1);
  sim.run_for(2s);
  const auto before = sim.requests.size();
  ASSERT_LE(before, 10u);
  const auto changed_at = sim.now();
  row.rate_per_sec = 40;
  sim.load({row});
  ASSERT_TRUE(sim.run_until([&] { return sim.all_rows(queue_row::state::done); }, 3s))
      << sim.count_rows(queue_row::state::done) << " done 3 s after the change";
  std::vector<received> after;
  for (const auto& r : sim.requests) {
    if (r.at >= changed_at) after.push_back(r);
  }
  EXPECT_LE(most_in_window(after, 1s), 1 + 40 + 1);
}

// An event type that would smuggle a request onto the connection is dead-lettered with the
// reason, without an attempt and without a byte sent; the rows around it go.
TEST(ShardCorePartner, AnEventTypeThatInjectsARequestIsDeadLetteredAndNeverSent) {
  simulation sim;
  auto row = simulation::subscriber(1, 1000.0, 100);
  row.max_in_flight = 1;
  sim.load({row});
  for (int i = 0; i < 3; ++i) sim.enqueue(1);
  const auto hostile =
      sim.enqueue(1, "{}", "video.x\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n");
  for (int i = 0; i < 3; ++i) sim.enqueue(1);
  ASSERT_TRUE(sim.run_until(
      [&] {
        return sim.count_rows(queue_row::state::pending) +
                   sim.count_rows(queue_row::state::leased) ==
               0;
      },
      10s));
  EXPECT_EQ(sim.queue.rows.at(hostile).now, queue_row::state::dead);
  EXPECT_EQ(sim.queue.rows.at(hostile).row.attempts, 0) << "no attempt was made";
  for (const auto& o : sim.outcomes) {
    if (o.delivery_id == hostile) {
      EXPECT_NE(o.last_error.find("unsafe event_type: contains CR/LF"), std::string::npos)
          << o.last_error;
    }
  }
  EXPECT_EQ(sim.count_rows(queue_row::state::done), 6);
  ASSERT_EQ(sim.requests.size(), 6u);
  for (const auto& r : sim.requests) EXPECT_NE(r.rows.front(), hostile);
}

// Requests hanging at one subscriber fill its origin's first slots and never answer; they stop
// counting against the origin's limit once overdue, so the healthy subscribers of the same
// host are served long before the hanging requests time out.
TEST(ShardCorePartner, RequestsHangingAtOneSubscriberDoNotHoldTheOriginFromTheOthers) {
  auto config = simulation::default_config();
  config.http.attempt_timeout = 6s;
  simulation sim(config);
  sim.partner = [](const received& r) {
    if (r.subscriber == 1) {
      return answer{.latency = 6s, .error = proto::transport_error::timeout, .detail = "timeout"};
    }
    return answer{};
  };
  std::vector<storage::subscriber_row> rows;
  for (std::int64_t id = 1; id <= 5; ++id)
    rows.push_back(simulation::subscriber(id, 1e6, 1'000'000));
  sim.load(rows);
  const auto start = sim.now();
  for (int i = 0; i < 16; ++i) sim.enqueue(1);
  // The healthy rows fall due a second in, when the hanging requests hold the slots.
  for (std::int64_t id = 2; id <= 5; ++id) {
    for (int i = 0; i < 100; ++i) sim.enqueue(id, R"({"clip":1})", "clip.viral", 1s);
  }
  ASSERT_TRUE(sim.run_until([&] { return sim.count_rows(queue_row::state::done) == 400; }, 30s));
  const auto healthy_done = sim.now();
  int hung_first = 0;
  for (const auto& r : sim.requests) hung_first += r.subscriber == 1 && r.at < start + 1s;
  EXPECT_GE(hung_first, config.scheduler.origin.initial) << "the hanging ones held the slots";
  EXPECT_LT(healthy_done - start, 6s) << "the healthy subscribers waited for the 6 s timeout";
}

// A quiet subscriber is polled at every idle poll, and asks for no tokens with those polls:
// tokens leased with each would go back unspent a lease later, two writes to its row per poll
// for every quiet subscriber.
TEST(ShardCorePartner, QuietSubscribersAskForNoTokensWithTheirIdlePolls) {
  auto config = simulation::default_config();
  config.scheduler.idle_poll_min = 100ms;
  config.scheduler.idle_poll_max = 100ms;
  simulation sim(config);
  std::vector<storage::subscriber_row> rows;
  for (std::int64_t id = 1; id <= 20; ++id) rows.push_back(simulation::subscriber(id, 10, 10));
  sim.load(rows);
  // The claim at start may lease: whether rows wait is not known yet.
  sim.run_for(1s);
  const auto polls_before = sim.claims.size();
  sim.run_for(5s);
  ASSERT_GE(sim.claims.size() - polls_before, 20u) << "the quiet subscribers were polled";
  int asked = 0;
  for (std::size_t i = polls_before; i < sim.claims.size(); ++i) {
    for (const auto& demand : sim.claims[i]) asked += demand.tokens > 0;
  }
  EXPECT_EQ(asked, 0) << "tokens asked with idle polls";
}

// Retries 50 ms after a failure, growing to 200 ms, 50 tries: a refused row goes again soon.
drain_config quick_retries() {
  auto config = simulation::default_config();
  config.retry.base_delay = 50ms;
  config.retry.max_delay = 200ms;
  config.retry.max_attempts = 50;
  config.retry_given = {.max_attempts = true, .base_delay = true, .max_delay = true};
  return config;
}

// An ordered subscriber whose partner fails two answers in five: each key's rows go out in
// enqueue order, a row's retry holds back its own key only, and the other keys go on.
TEST(ShardCorePartner, EachOrderedKeyGoesOutInEnqueueOrderThroughRetriesWhileTheOthersGoOn) {
  simulation sim(quick_retries());
  sim.commits = commit_timing{};
  int answered = 0;
  sim.partner = [&](const received&) {
    const int n = answered++ % 5;
    return answer{.status = n == 1 || n == 3 ? 503 : 200};
  };
  auto subscriber = simulation::subscriber(1, 1000.0, 100);
  subscriber.order = proto::order_rule{.pointer = "/video_id"};
  sim.load({subscriber});
  // The producer's layout: one row per key per event, interleaved.
  std::map<std::int64_t, int> key_of;
  std::map<int, std::vector<std::int64_t>> rows_of;
  for (int event = 0; event < 6; ++event) {
    for (int key = 0; key < 8; ++key) {
      const auto row = sim.enqueue(1, R"({"video_id":"v)" + std::to_string(key) + R"("})");
      key_of[row] = key;
      rows_of[key].push_back(row);
    }
  }
  ASSERT_TRUE(sim.run_until([&] { return sim.all_rows(queue_row::state::done); }, 120s));
  std::map<int, std::vector<std::int64_t>> sent_of;  // each key's requests, in order
  for (const auto& r : sim.requests) sent_of[key_of.at(r.rows.front())].push_back(r.rows.front());
  int retried = 0;
  for (const auto& [key, sent] : sent_of) {
    // Each row's requests come after the previous row's last one.
    std::vector<std::int64_t> order = sent;
    order.erase(std::unique(order.begin(), order.end()), order.end());
    EXPECT_EQ(order, rows_of.at(key)) << "key v" << key << " went out of order";
    retried += static_cast<int>(sent.size() - order.size());
  }
  EXPECT_GT(retried, 5) << "the partner's failures should have caused retries";
  // While a key waited for a retry, other keys were sent: not one key at a time.
  std::set<int> keys_in_first_ten;
  for (std::size_t i = 0; i < 10; ++i)
    keys_in_first_ten.insert(key_of.at(sim.requests[i].rows.front()));
  EXPECT_GT(keys_in_first_ten.size(), 1u);
}

// Each key's rows in enqueue order across requests that batch rows of several keys, through the
// retries of the batches the partner refuses: what `--ordered` and `--batch` promise together.
TEST(ShardCorePartner, BatchesOfSeveralKeysKeepEachKeysOrderThroughRetries) {
  simulation sim(quick_retries());
  int answered = 0;
  sim.partner = [&](const received&) { return answer{.status = answered++ % 3 == 1 ? 503 : 200}; };
  auto subscriber = simulation::subscriber(1, 1000.0, 100);
  subscriber.order = proto::order_rule{.pointer = "/video_id"};
  subscriber.batch_max = 8;
  subscriber.batch_linger = 0.05;
  sim.load({subscriber});
  std::map<std::int64_t, int> key_of;
  for (int event = 0; event < 6; ++event) {
    for (int key = 0; key < 10; ++key)
      key_of[sim.enqueue(1, R"({"video_id":"v)" + std::to_string(key) + R"("})")] = key;
  }
  ASSERT_TRUE(sim.run_until([&] { return sim.all_rows(queue_row::state::done); }, 60s));
  const auto sent = sim.requests_of(1);
  EXPECT_TRUE(std::any_of(sent.begin(), sent.end(), [](const auto& r) {
    return r.rows.size() > 1;
  })) << "rows of different keys should have shared batches";
  std::map<int, std::vector<std::int64_t>> rows_per_key;
  for (const auto& request : sent) {
    for (const auto row : request.rows) rows_per_key[key_of.at(row)].push_back(row);
  }
  for (auto& [key, rows] : rows_per_key) {
    // A retried batch sends its rows again, right after their refused try.
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end())) << "key v" << key;
    EXPECT_EQ(rows.size(), 6u) << "key v" << key;
  }
  EXPECT_GT(answered, 60 / 8 + 2) << "the partner's refusals should have caused retries";
}

// --max-in-flight caps requests across every subscriber, and each subscriber waiting for a slot
// is served in turn.
TEST(ShardCorePartner, TheProcessWideInFlightCapHoldsAndServesEveryWaitingSubscriber) {
  auto config = simulation::default_config();
  config.scheduler.max_in_flight = 2;
  simulation sim(config);
  sim.partner = [](const received&) { return answer{.latency = 200ms}; };
  std::vector<storage::subscriber_row> rows;
  for (std::int64_t id = 1; id <= 4; ++id) rows.push_back(simulation::subscriber(id, 1000, 100));
  sim.load(rows);
  for (std::int64_t id = 1; id <= 4; ++id) {
    for (int i = 0; i < 5; ++i) sim.enqueue(id);
  }
  ASSERT_TRUE(sim.run_until([&] { return sim.all_rows(queue_row::state::done); }, 30s));
  EXPECT_LE(most_open(sim.requests, 200ms), 2);
  for (std::int64_t id = 1; id <= 4; ++id) EXPECT_EQ(sim.requests_of(id).size(), 5u);
  // In turn: every subscriber had a request out within the first round of slots.
  std::set<std::int64_t> first_round;
  for (std::size_t i = 0; i < 8 && i < sim.requests.size(); ++i) {
    first_round.insert(sim.requests[i].subscriber);
  }
  EXPECT_EQ(first_round.size(), 4u);
}

}  // namespace
}  // namespace surge::engine

namespace surge::engine {
namespace {

// A partner that allows 20 requests per 2 s window, refuses the rest with 429 and says what is
// left (X-RateLimit-*, the reset as seconds left); its neighbour on the same terms says nothing.
// The announced quota paces subscriber 1, configured for 50/s, to the partner's windows, with no
// refusal; the silent one hits the wall. What the partner announced is published for /metrics.
TEST(ShardCorePartner, AnAnnouncedQuotaPacesWithoutARefusalAndIsPublished) {
  simulation sim;
  const auto start = sim.now();
  constexpr int quota = 20;
  constexpr auto window = 2s;
  std::map<std::pair<std::int64_t, std::int64_t>, int> used;  // by subscriber and window
  sim.partner = [&](const received& r) {
    const auto index = (r.at - start) / window;
    const int count = ++used[{r.subscriber, index}];
    answer reply;
    if (count > quota) reply.status = 429;
    if (r.subscriber == 1) {
      const auto left = start + (index + 1) * window - r.at;
      const auto seconds = std::chrono::ceil<std::chrono::seconds>(left).count();
      reply.quota = {{proto::quota_field::x_limit, std::to_string(quota)},
                     {proto::quota_field::x_remaining, std::to_string(std::max(0, quota - count))},
                     {proto::quota_field::x_reset, std::to_string(seconds)}};
    }
    return reply;
  };
  sim.load({simulation::subscriber(1, 50.0, 5), simulation::subscriber(2, 50.0, 5)});
  for (int i = 0; i < 400; ++i) {
    sim.enqueue(1);
    sim.enqueue(2);
  }
  sim.run_for(10s);
  const auto refused = [&](std::int64_t subscriber) {
    int refusals = 0;
    for (const auto& [key, count] : used) {
      if (key.first == subscriber) refusals += std::max(0, count - quota);
    }
    return refusals;
  };
  EXPECT_EQ(refused(1), 0);
  EXPECT_GT(refused(2), 0) << "the silent partner's wall was never reached";
  // Each window's quota is used, less what the reset's whole seconds cost.
  EXPECT_GE(sim.requests_of(1).size(), 4u * quota);
  const auto text = metrics_text(sim.metrics(), 10);
  EXPECT_NE(text.find("surge_subscriber_announced_quota{subscriber=\"1\"} 20"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("surge_subscriber_announced_quota{subscriber=\"2\"}"), std::string::npos);
  EXPECT_NE(text.find("surge_subscriber_announced_remaining{subscriber=\"1\"}"), std::string::npos);
}

}  // namespace
}  // namespace surge::engine
