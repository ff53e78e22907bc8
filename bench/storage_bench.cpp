// Storage micro benchmarks on a real WAL file: one claim transaction and one outcome-writer
// transaction at the batch sizes the engine uses. The budget is a few microseconds per row
// for claim + complete; divide the reported time by the batch size (items_per_second says it).
// Each runs on rows interleaved as a producer's fan-out writes them (/interleaved/) and, for
// the comparison, on each subscriber's rows together (/contiguous/).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>
#include <benchmark/benchmark.h>
#include <unistd.h>

#include "storage/sqlite/claims.hpp"
#include "storage/sqlite/database.hpp"
#include "storage/sqlite/outcomes.hpp"
#include "storage/sqlite/ownership.hpp"
#include "storage/sqlite/schema.hpp"
#include "storage/sqlite/subscribers.hpp"

namespace {

using namespace surge::storage;
// The SQLite backend's own pieces (the claimer, the outcome writer) are what is measured.
using namespace surge::storage::sqlite;

constexpr int bench_subscribers = 10;
constexpr double emitted_at = 1000;

enum class row_layout { interleaved, contiguous };

// A migrated queue file in its own temporary directory, removed afterwards, holding `rows` due
// rows spread evenly over bench_subscribers subscribers: interleaved as a producer writes a
// spike (event by event, one row per subscriber), or each subscriber's rows together.
class bench_queue {
 public:
  explicit bench_queue(int rows, row_layout layout = row_layout::interleaved) {
    std::random_device entropy;
    dir_ = std::filesystem::temp_directory_path() /
           ("surge_storage_bench_" + std::to_string(::getpid()) + "_" + std::to_string(entropy()));
    std::filesystem::create_directories(dir_);
    database_config config;
    config.path = (dir_ / "queue.db").string();
    db_.emplace(open_database(config));
    migrate(*db_);
    for (int i = 0; i < bench_subscribers; ++i) {
      subscriber_row row;
      row.url = "http://127.0.0.1:8080/hook";
      row.secret = "secret";
      subscribers_.push_back(add_subscriber(*db_, row));
    }
    const std::string payload(400, 'x');  // a typical small JSON event body
    const int per_subscriber = rows / bench_subscribers;
    SQLite::Transaction transaction(*db_, SQLite::TransactionBehavior::IMMEDIATE);
    SQLite::Statement insert(*db_,
                             "INSERT INTO webhook_delivery (subscriber_id, event_type, payload, "
                             "next_attempt_at, created_at) VALUES (?, 'video.trending', ?, ?, ?)");
    insert.bind(2, payload);
    insert.bind(3, emitted_at);
    insert.bind(4, emitted_at);
    for (int i = 0; i < per_subscriber * bench_subscribers; ++i) {
      const int subscriber =
          layout == row_layout::interleaved ? i % bench_subscribers : i / per_subscriber;
      insert.bind(1, subscribers_[static_cast<std::size_t>(subscriber)]);
      insert.exec();
      insert.reset();
    }
    transaction.commit();
  }
  ~bench_queue() {
    db_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  bench_queue(const bench_queue&) = delete;
  bench_queue& operator=(const bench_queue&) = delete;

  SQLite::Database& db() { return *db_; }
  std::vector<subscriber_demand> demand(int rows) const {
    std::vector<subscriber_demand> out;
    for (const auto id : subscribers_) out.push_back({id, rows / bench_subscribers});
    return out;
  }

 private:
  std::filesystem::path dir_;
  std::optional<SQLite::Database> db_;
  std::vector<std::int64_t> subscribers_;
};

// Claims `batch` rows (batch / 10 from each of 10 subscribers) per iteration. The backlog is
// ten batches deep; each iteration's `now` lies past the previous leases, so the same oldest
// rows are found free again without any untimed reset.
void BM_storage_claim(benchmark::State& state, row_layout layout) {
  const int batch = static_cast<int>(state.range(0));
  bench_queue queue(batch * 10, layout);
  claimer claims(queue.db());
  const auto demand = queue.demand(batch);
  double now = emitted_at + 1;
  for (auto _ : state) {
    const auto rows = claims.claim(demand, now, 30);
    if (static_cast<int>(rows.size()) != batch) {
      state.SkipWithError("claimed fewer rows than asked");
      break;
    }
    benchmark::DoNotOptimize(rows.data());
    now += 60;
  }
  state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK_CAPTURE(BM_storage_claim, interleaved, row_layout::interleaved)
    ->Arg(100)
    ->Arg(1000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_storage_claim, contiguous, row_layout::contiguous)
    ->Arg(100)
    ->Arg(1000)
    ->Unit(benchmark::kMicrosecond);

// Writes `batch` done outcomes, each with its attempt record, in one transaction. Untimed: the
// rows are put back to pending under a known lease so every fence holds.
void BM_storage_outcomes(benchmark::State& state, row_layout layout) {
  const int batch = static_cast<int>(state.range(0));
  bench_queue queue(batch, layout);
  outcome_writer writer(queue.db());
  constexpr double lease = 5000.000123;
  std::vector<outcome> outcomes;
  {
    SQLite::Statement ids(queue.db(), "SELECT id, subscriber_id FROM webhook_delivery");
    while (ids.executeStep()) {
      outcome& out = outcomes.emplace_back();
      out.delivery_id = ids.getColumn(0).getInt64();
      out.lease = lease;
      out.kind = outcome_kind::done;
      out.attempts = 1;
      out.last_status = 200;
      out.finished_at = emitted_at + 2;
      out.has_attempt = true;
      out.attempt = {
          out.delivery_id, ids.getColumn(1).getInt64(), 1, emitted_at + 1, emitted_at + 2, 200, ""};
    }
  }
  for (auto _ : state) {
    state.PauseTiming();
    queue.db().exec(
        "UPDATE webhook_delivery SET status = 'pending', attempts = 0, delivered_at = NULL, "
        "locked_until = " +
        std::to_string(lease));
    state.ResumeTiming();
    const auto report = writer.write(outcomes);
    if (report.applied != batch) {
      state.SkipWithError("a fence did not hold");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK_CAPTURE(BM_storage_outcomes, interleaved, row_layout::interleaved)
    ->Arg(100)
    ->Arg(1000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_storage_outcomes, contiguous, row_layout::contiguous)
    ->Arg(100)
    ->Arg(1000)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

// One ownership renewal (storage/sqlite/ownership.hpp) with `state.range(0)` subscribers spread
// over ten live drains: the transaction each drain runs once a second. With `state.range(1)` 0, the
// steady state: nothing changed, so the renewal extends the heartbeat after a fingerprint read
// (proto::heartbeat_is_enough). With 1, a subscriber is added before each renewal (untimed), so
// every renewal reads every subscriber and owner and plans again, as after any change and at
// least every 30 s. Divide by ten drains per second for the share of the write lock it takes.
void BM_ownership_renew(benchmark::State& state) {
  const auto subscribers = static_cast<int>(state.range(0));
  const bool full = state.range(1) != 0;
  bench_queue queue(bench_subscribers);
  subscriber_row row;
  row.url = "http://127.0.0.1:8080/hook";
  row.secret = "secret";
  for (int i = bench_subscribers; i < subscribers; ++i) add_subscriber(queue.db(), row);
  constexpr int drains = 10;
  std::vector<ownership_keeper> keepers;
  keepers.reserve(drains);
  for (int i = 0; i < drains; ++i) {
    keepers.emplace_back(queue.db(), "surge@bench-" + std::to_string(i) + ":1",
                         surge::proto::id_set{}, 4.0);
  }
  double now = emitted_at;
  // Settle: releases and takes until every drain holds its share.
  for (int round = 0; round < 3; ++round, now += 1) {
    for (auto& keeper : keepers) keeper.renew(now);
  }
  std::size_t next = 0;
  std::int64_t full_before = 0;
  for (const auto& keeper : keepers) full_before += keeper.full_renewals();
  for (auto _ : state) {
    if (full) {
      state.PauseTiming();
      add_subscriber(queue.db(), row);
      state.ResumeTiming();
    }
    const auto change = keepers[next].renew(now);
    benchmark::DoNotOptimize(change.taken.data());
    next = (next + 1) % keepers.size();
    if (next == 0) now += 1;
  }
  std::int64_t full_after = 0;
  for (const auto& keeper : keepers) full_after += keeper.full_renewals();
  state.counters["full_share"] =
      static_cast<double>(full_after - full_before) / static_cast<double>(state.iterations());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ownership_renew)
    ->ArgsProduct({{1000, 10000, 100000}, {0, 1}})
    ->ArgNames({"subscribers", "full"})
    ->Unit(benchmark::kMillisecond);
