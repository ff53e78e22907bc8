// The second published queue shape (seed001) end to end through the real CLI: a file made by
// that shape's own DDL and filled with its producer's statements, `surge migrate` and
// `surge drain` on it, the real `surge sink` verifying each stored signature against the
// subscriber's secret, and the shape's own worker (surge_seed001_worker) beside the drain.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <boost/json/parse.hpp>
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "proto/signing.hpp"
#include "tests/storage/seed001/worker_sql.hpp"
#include "tests/support/e2e.hpp"
#include "tests/support/http_get.hpp"
#include "tests/support/seed001_ddl.hpp"
#include "tests/support/shared_ddl.hpp"

namespace surge::testing {
namespace {

using namespace std::chrono_literals;
namespace sql = seed001_worker_sql;

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
std::int64_t whole_now() { return static_cast<std::int64_t>(std::floor(unix_now())); }

// A seed001 queue file as its own programs make and fill it; Surge's code never touches it here.
class seed001_file {
 public:
  explicit seed001_file(const temp_dir& dir, const std::string& name = "queue.db")
      : path_(dir.file(name)),
        db_(
            [&] {
              SQLite::Database raw(path_, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
              raw.exec(seed001_ddl);
              return path_;
            }(),
            SQLite::OPEN_READWRITE, 5000) {}

  const std::string& path() const { return path_; }
  SQLite::Database& db() { return db_; }

  // A subscriber pointed at the sink's /hook/<its id>.
  std::int64_t add_subscriber(const sink_process& sink, std::int64_t per_minute, std::int64_t burst,
                              const std::string& secret) {
    SQLite::Statement insert(db_, sql::insert_subscriber);
    insert.bind(1, "http://placeholder.invalid/");
    insert.bind(2, secret);
    insert.bind(3, R"(["video.*"])");
    insert.bind(4, per_minute);
    insert.bind(5, burst);
    insert.bind(6, "DE");
    insert.exec();
    const auto id = db_.getLastInsertRowid();
    SQLite::Statement point(db_, "UPDATE webhook_subscribers SET endpoint = ? WHERE id = ?");
    point.bind(1, sink.url_for(id));
    point.bind(2, id);
    point.exec();
    secrets_[id] = secret;
    return id;
  }

  // The producer's rows: the payload's bytes as a BLOB and its signature computed once, now.
  // `signature` overrides the correct one (a producer bug).
  std::vector<std::int64_t> add_rows(std::int64_t subscriber, int count, const std::string& payload,
                                     std::optional<std::string> signature = std::nullopt,
                                     std::optional<std::int64_t> enqueued_at = std::nullopt) {
    SQLite::Statement insert(db_, sql::insert_delivery);
    const auto at = enqueued_at.value_or(whole_now());
    std::vector<std::int64_t> ids;
    for (int i = 0; i < count; ++i) {
      insert.reset();
      insert.bind(1, subscriber);
      insert.bind(2, "video.trending");
      insert.bind(3, payload.data(), static_cast<int>(payload.size()));
      insert.bind(
          4, signature.value_or(proto::stored_signature_for(secrets_.at(subscriber), payload)));
      insert.bind(5, at);
      insert.bind(6, std::max(at, whole_now()));
      insert.exec();
      ids.push_back(db_.getLastInsertRowid());
    }
    return ids;
  }

  std::string text(const std::string& query) { return db_.execAndGet(query).getString(); }
  std::int64_t number(const std::string& query) { return db_.execAndGet(query).getInt64(); }
  std::string of_row(const char* column, std::int64_t id) {
    return text(std::string("SELECT ") + column +
                " FROM webhook_deliveries WHERE id = " + std::to_string(id));
  }
  bool has_table(const std::string& name) { return db_.tableExists(name); }

 private:
  std::string path_;
  SQLite::Database db_;
  std::map<std::int64_t, std::string> secrets_;
};

std::vector<std::string> drain_args(const std::string& path, std::vector<std::string> more = {}) {
  std::vector<std::string> args{
      "drain", "--db",      path, "--allow-private-targets", "--progress-interval",
      "0",     "--threads", "2"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// The sink's protocol-slip counters: a request without X-VVV-Delivery-Id, X-VVV-Attempt,
// X-VVV-Event or X-VVV-Subscriber, or without Content-Type application/json.
std::pair<std::int64_t, std::int64_t> slips(const sink_process& sink) {
  const auto reply = http_get(sink.port(), "/_sink/stats");
  const auto problems = boost::json::parse(reply.body).at("problems");
  return {problems.at("missing_delivery_headers").to_number<std::int64_t>(),
          problems.at("bad_content_type").to_number<std::int64_t>()};
}

TEST(Seed001Drain, MigrateAndDrainSendTheStoredBytesAndSignatureOnceEach) {
  temp_dir dir;
  seed001_file queue(dir);
  sink_process sink(dir, queue.path());
  // Payloads as a producer stores them: not only compact ASCII JSON.
  const std::vector<std::string> payloads = {R"({"video":"v1"})",
                                             "{ \"video\" : \"v\xc3\xa9\" ,\n \"rank\": 3 }\n",
                                             R"({"video":"v2","tags":["a","b"]})"};
  std::map<std::int64_t, std::string> expected;  // delivery id -> payload
  std::map<std::int64_t, std::int64_t> owner;    // delivery id -> subscriber
  for (const char* secret : {"first-secret", "second secret"}) {
    const auto id = queue.add_subscriber(sink, 60'000, 500, secret);
    for (const auto& payload : payloads) {
      for (const auto row : queue.add_rows(id, 20, payload)) {
        expected[row] = payload;
        owner[row] = id;
      }
    }
  }

  const auto migrated = run_surge(dir, {"migrate", "--db", queue.path()});
  ASSERT_EQ(migrated.exit_code, 0) << migrated.err;
  EXPECT_NE(migrated.out.find("schema version"), std::string::npos) << migrated.out;
  EXPECT_FALSE(queue.has_table("webhook_delivery")) << "migrate created seed000's tables";
  EXPECT_FALSE(queue.has_table("webhook_subscriber")) << "migrate created seed000's tables";

  const auto result = run_surge(dir, drain_args(queue.path(), {"--until-drained"}));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("(drained)"), std::string::npos) << result.out;
  EXPECT_EQ(slips(sink), std::make_pair(std::int64_t{0}, std::int64_t{0}));

  const auto requests = sink.stop_and_read();
  ASSERT_EQ(requests.size(), expected.size());
  for (const auto& request : requests) {
    // ok: X-VVV-Signature is the lowercase hex HMAC-SHA256 of the body under the secret.
    EXPECT_EQ(request.verdict, "ok") << "delivery " << request.delivery_id;
    EXPECT_EQ(request.status, 200);
    EXPECT_EQ(request.attempt, 1);  // attempt + 1 of a row never tried
    EXPECT_EQ(request.event_type, "video.trending");
    ASSERT_TRUE(expected.contains(request.delivery_id));
    EXPECT_EQ(request.body_sha256, sha256_hex(expected[request.delivery_id]));
    EXPECT_EQ(request.subscriber_id, owner[request.delivery_id]);
  }
  const auto per_delivery = deliveries(requests);
  for (const auto& [id, payload] : expected) EXPECT_EQ(per_delivery.count(id), 1u) << id;
  for (const auto& [id, payload] : expected) {
    EXPECT_EQ(queue.of_row("state", id), "delivered");
    EXPECT_EQ(queue.of_row("attempt", id), "1");
    EXPECT_EQ(queue.of_row("typeof(leased_until) || ' ' || leased_until", id), "integer 0");
  }
}

// Buckets no drainer could have written (text tokens, a stamp a day ahead, a deep debt) are
// repaired and said, not left to stop their subscribers for a day.
TEST(Seed001Drain, BucketRowsNoDrainerCouldHaveWrittenStopNobody) {
  temp_dir dir;
  seed001_file queue(dir);
  sink_process sink(dir, queue.path());
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(queue.add_subscriber(sink, 600, 5, "secret"));
    queue.add_rows(ids.back(), 10, R"({"video":"v1"})");
  }
  const auto now = std::to_string(whole_now());
  const auto ahead = std::to_string(whole_now() + 86'400);
  queue.db().exec("INSERT INTO webhook_buckets(subscriber_id, tokens, updated_at) VALUES (" +
                  std::to_string(ids[1]) + ", 'full', " + now + "), (" + std::to_string(ids[2]) +
                  ", 0, " + ahead + "), (" + std::to_string(ids[3]) + ", -1e9, " + now + ")");
  const auto result = run_surge(dir, drain_args(queue.path(), {"--until-drained"}));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("summary: delivered=40 "), std::string::npos) << result.out;
  for (const auto& [id, why] : {std::pair{ids[1], "its token count is not a number"},
                                {ids[2], "stamped 86"},
                                {ids[3], "a debt of 1000000000 tokens"}}) {
    EXPECT_NE(
        result.err.find(
            "subscriber " + std::to_string(id) +
            ": its persisted token bucket no drainer could have written was repaired (" + why),
        std::string::npos)
        << result.err;
  }
  EXPECT_EQ(
      queue.number("SELECT count(*) FROM webhook_buckets WHERE updated_at > " + ahead + " - 1"), 0);
}

// 503 with Retry-After is honoured as given; other failures back off 2^attempt s plus up to
// 30 s; the 12th failure and a row past its 24 hours end dead; the times stay whole seconds.
TEST(Seed001Drain, RetriesFollowTheShapesOwnRules) {
  temp_dir dir;
  seed001_file queue(dir);
  sink_process sink(dir, queue.path(), {.behaviours_json = R"({"1": {"status": 500},
                                            "2": {"status": 503, "retry_after": "7"}})"});
  const auto failing = queue.add_subscriber(sink, 60'000, 500, "secret");
  const auto paused = queue.add_subscriber(sink, 60'000, 500, "secret");
  ASSERT_EQ(failing, 1);
  ASSERT_EQ(paused, 2);
  const std::string payload = R"({"video":"v1"})";
  const auto fresh = queue.add_rows(failing, 1, payload).front();
  const auto last_try = queue.add_rows(failing, 1, payload).front();
  queue.db().exec("UPDATE webhook_deliveries SET attempt = 11 WHERE id = " +
                  std::to_string(last_try));
  const auto told = queue.add_rows(paused, 1, payload).front();
  // Queued more than 24 hours ago (its worker kept putting it back): never attempted again.
  const auto stale =
      queue.add_rows(failing, 1, payload, std::nullopt, whole_now() - 86400 - 60).front();

  const double before = unix_now();
  const auto result = run_surge(dir, drain_args(queue.path(), {"--duration", "3"}));
  const double after = unix_now();
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto per_delivery = deliveries(sink.stop_and_read());
  EXPECT_EQ(per_delivery.at(fresh), 1);
  EXPECT_EQ(per_delivery.at(last_try), 1);
  EXPECT_EQ(per_delivery.at(told), 1);
  EXPECT_EQ(per_delivery.count(stale), 0u);
  EXPECT_EQ(queue.of_row("state", stale), "dead");
  EXPECT_EQ(queue.of_row("attempt", stale), "0");

  EXPECT_EQ(queue.of_row("state", fresh), "pending");
  EXPECT_EQ(queue.of_row("attempt", fresh), "1");
  EXPECT_EQ(queue.of_row("typeof(next_attempt)", fresh), "integer");
  const auto next = std::stod(queue.of_row("next_attempt", fresh));
  EXPECT_GE(next, std::floor(before) + 2);     // 2^1 s at least
  EXPECT_LE(next, std::ceil(after) + 2 + 30);  // plus at most 30 s

  EXPECT_EQ(queue.of_row("state", last_try), "dead");
  EXPECT_EQ(queue.of_row("attempt", last_try), "12");

  EXPECT_EQ(queue.of_row("state", told), "pending");
  const auto told_next = std::stod(queue.of_row("next_attempt", told));
  EXPECT_GE(told_next, std::floor(before) + 7);
  EXPECT_LE(told_next, std::ceil(after) + 7);
  for (const auto row : {fresh, last_try, told, stale}) {
    EXPECT_EQ(queue.of_row("leased_until", row), "0") << row;
  }
}

TEST(Seed001Drain, AQueueSurgeCannotUseExitsTwoNamingWhatIsMissing) {
  temp_dir dir;
  // Empty: no tables at all.
  const auto empty = dir.file("empty.db");
  { SQLite::Database raw(empty, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE); }
  auto drained = run_surge(dir, drain_args(empty, {"--until-drained"}));
  EXPECT_EQ(drained.exit_code, 2) << drained.out << drained.err;
  EXPECT_NE(drained.err.find("is empty: it holds no tables"), std::string::npos) << drained.err;

  // Half-migrated: the bucket table was never created.
  seed001_file half(dir, "half.db");
  half.db().exec("DROP TABLE webhook_buckets");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"migrate", "--db", half.path()},
        drain_args(half.path(), {"--until-drained"}),
        std::vector<std::string>{"stats", "--db", half.path()},
        std::vector<std::string>{"emit", "--db", half.path(), "--type", "video.trending", "--data",
                                 "{}"},
        std::vector<std::string>{"dead", "list", "--db", half.path()}}) {
    const auto result = run_surge(dir, args);
    EXPECT_EQ(result.exit_code, 2) << args[0] << ": " << result.out << result.err;
    EXPECT_NE(result.err.find("half-migrated seed001 queue"), std::string::npos) << result.err;
    EXPECT_NE(result.err.find("missing webhook_buckets"), std::string::npos) << result.err;
  }
  EXPECT_FALSE(half.has_table("webhook_buckets"));
  EXPECT_FALSE(half.has_table("webhook_delivery"));

  // Both shapes: refused until one is named, on the command line or in a --config file.
  seed001_file both(dir, "both.db");
  both.db().exec(shared_ddl);
  const auto refused = run_surge(dir, drain_args(both.path(), {"--until-drained"}));
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("holds tables of both published shapes"), std::string::npos)
      << refused.err;
  const auto stats = run_surge(dir, {"stats", "--db", both.path(), "--queue-shape", "seed001"});
  EXPECT_EQ(stats.exit_code, 0) << stats.err;
  const auto config = dir.file("surge.toml");
  std::ofstream(config) << "queue-shape = \"seed001\"\n";
  const auto configured =
      run_surge(dir, drain_args(both.path(), {"--until-drained", "--config", config}));
  EXPECT_EQ(configured.exit_code, 0) << configured.err;
  EXPECT_NE(configured.out.find("(drained)"), std::string::npos) << configured.out;
}

TEST(Seed001Drain, TheToolsWriteAndReadTheShapesOwnColumns) {
  temp_dir dir;
  seed001_file queue(dir);
  ASSERT_EQ(run_surge(dir, {"migrate", "--db", queue.path()}).exit_code, 0);
  const auto added = run_surge(
      dir, {"subscriber", "add", "--db", queue.path(), "--url", "https://partner.example/hook",
            "--rate-per-minute", "120", "--burst", "5", "--events", "video.*, user.signup",
            "--secret", "tool-secret", "--region", "FR"});
  ASSERT_EQ(added.exit_code, 0) << added.err;
  const auto id = std::stoll(added.out);
  const auto subscriber = [&](const char* column) {
    return queue.text(std::string("SELECT ") + column +
                      " FROM webhook_subscribers WHERE id = " + std::to_string(id));
  };
  EXPECT_EQ(subscriber("endpoint"), "https://partner.example/hook");
  EXPECT_EQ(subscriber("rate_per_min"), "120");
  EXPECT_EQ(subscriber("events"), R"(["video.*","user.signup"])");
  EXPECT_EQ(subscriber("region"), "FR");
  const auto without_region = run_surge(
      dir, {"subscriber", "add", "--db", queue.path(), "--url", "https://partner.example/b"});
  EXPECT_EQ(without_region.exit_code, 2) << without_region.err;
  EXPECT_NE(without_region.err.find("--region"), std::string::npos) << without_region.err;

  ASSERT_EQ(run_surge(dir, {"subscriber", "set", "--db", queue.path(), std::to_string(id),
                            "--rate-per-minute", "30"})
                .exit_code,
            0);
  EXPECT_EQ(subscriber("rate_per_min"), "30");
  EXPECT_EQ(subscriber("events"), R"(["video.*","user.signup"])");

  const std::string payload = R"({"video":"v9"})";
  const auto emitted = run_surge(dir, {"emit", "--db", queue.path(), "--type", "video.rank_updated",
                                       "--data", payload, "--count", "2"});
  ASSERT_EQ(emitted.exit_code, 0) << emitted.err;
  EXPECT_EQ(queue.number("SELECT COUNT(*) FROM webhook_deliveries"), 2);
  EXPECT_EQ(queue.text("SELECT DISTINCT typeof(payload) FROM webhook_deliveries"), "blob");
  EXPECT_EQ(queue.text("SELECT DISTINCT CAST(payload AS TEXT) FROM webhook_deliveries"), payload);
  EXPECT_EQ(queue.text("SELECT DISTINCT signature FROM webhook_deliveries"),
            proto::stored_signature_for("tool-secret", payload));
  EXPECT_EQ(queue.text("SELECT DISTINCT typeof(enqueued_at) || typeof(next_attempt) FROM "
                       "webhook_deliveries"),
            "integerinteger");

  const auto stats = run_surge(dir, {"stats", "--db", queue.path(), "--json"});
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_NE(stats.out.find("\"pending\":2"), std::string::npos) << stats.out;
  queue.db().exec("UPDATE webhook_deliveries SET state = 'dead'");
  const auto replayed = run_surge(dir, {"dead", "replay", "--db", queue.path()});
  EXPECT_EQ(replayed.exit_code, 0) << replayed.err;
  EXPECT_EQ(queue.number("SELECT COUNT(*) FROM webhook_deliveries WHERE state = 'pending'"), 2);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"audit", "--db", queue.path()},
        std::vector<std::string>{"prune", "--db", queue.path(), "--older-than", "7d"}}) {
    const auto result = run_surge(dir, args);
    EXPECT_EQ(result.exit_code, 0) << args[0] << ": " << result.err;
  }
}

// The shape's own worker, four at a time as its cron runs it, and a drain on one subscriber of
// one file: every row goes out once, and the partner sees at most burst + rate x T from all
// five together. One run; returns how many rows the workers sent (0: they never got a token
// beside the drain, and the run showed no overlap).
std::size_t run_beside_the_workers(double rate, int burst, int rows) {
  constexpr int workers = 4;
  temp_dir dir;
  seed001_file queue(dir);
  sink_process sink(dir, queue.path());
  const auto id = queue.add_subscriber(sink, static_cast<std::int64_t>(rate * 60), burst, "s");
  queue.add_rows(id, rows, R"({"video":"v1"})");
  EXPECT_EQ(run_surge(dir, {"migrate", "--db", queue.path()}).exit_code, 0);

  // The drain first, so that it is seen sending: the workers poll the bucket in a tight loop
  // and, started first, could take every token before the drain's first lease.
  tools::child_process drain(surge_binary(), drain_args(queue.path(), {"--duration", "5"}),
                             dir.file("drain.out"), dir.file("drain.err"));
  EXPECT_TRUE(eventually([&] { return !read_sink_record(sink.record_path()).empty(); }, 30s));
  std::vector<std::unique_ptr<tools::child_process>> running;
  for (int i = 0; i < workers; ++i) {
    const auto n = std::to_string(i);
    running.push_back(std::make_unique<tools::child_process>(
        SURGE_SEED001_WORKER_PATH,
        std::vector<std::string>{"--db", queue.path(), "--duration", "3", "--sent",
                                 dir.file("worker" + n + ".sent")},
        dir.file("worker" + n + ".out"), dir.file("worker" + n + ".err")));
  }
  for (auto& worker : running) EXPECT_EQ(worker->wait(60s).value_or(-1), 0);
  EXPECT_EQ(drain.wait(60s).value_or(-1), 0);

  const auto requests = sink.stop_and_read();
  std::vector<double> together;
  std::map<std::int64_t, int> sends;
  for (const auto& request : requests) {
    together.push_back(request.arrival);
    ++sends[request.delivery_id];
  }
  std::size_t by_worker = 0;
  int workers_sending = 0;
  for (int i = 0; i < workers; ++i) {
    std::ifstream in(dir.file("worker" + std::to_string(i) + ".sent"));
    std::size_t by_this = 0;
    for (std::int64_t subscriber = 0, row = 0; in >> subscriber >> row;) {
      double at = 0;
      in >> at;
      together.push_back(at);
      ++sends[row];
      ++by_this;
    }
    by_worker += by_this;
    workers_sending += by_this > 0 ? 1 : 0;
  }
  std::printf("surge sent %zu, the workers %zu (%d of them sent)\n", requests.size(), by_worker,
              workers_sending);
  EXPECT_FALSE(requests.empty());
  for (const auto& [row, count] : sends) EXPECT_EQ(count, 1) << "row " << row;
  std::sort(together.begin(), together.end());
  for (const double window : {0.5, 1.0, 1.4, 2.0, 4.0}) {
    // Plus one for clock granularity, and the refill of the drain's take-to-send latency (a
    // token it took arrives some milliseconds later, while the workers spend the refill
    // meanwhile; their times are taken at their take): 50 ms of it under the sanitizers,
    // nothing at 10/s, 5 at 100/s. Holding a lease beside them cost 7 to 8 more than that.
    const double in_transit = std::floor(rate * 0.05);
    EXPECT_LE(max_in_window(together, window), burst + rate * window + 1 + in_transit)
        << window << " s";
  }
  EXPECT_EQ(queue.number("SELECT COUNT(*) FROM webhook_deliveries WHERE state = 'delivered'"),
            static_cast<std::int64_t>(sends.size()));
  EXPECT_LE(queue.number("SELECT tokens FROM webhook_buckets"), burst);
  return by_worker;
}

// The workers poll the bucket in a tight loop beside the drain's leases; under a loaded machine
// they may get no token in their 3 s, and that run proves nothing about sharing the bucket. Each
// run's own checks hold whatever the overlap; a run without one is repeated, at most twice.
TEST(Seed001Drain, BesideFourOfTheShapesOwnWorkersNoRowGoesTwiceAndTheBucketHolds) {
  std::size_t by_worker = 0;
  for (int run = 0; run < 3 && by_worker == 0 && !::testing::Test::HasFailure(); ++run) {
    by_worker = run_beside_the_workers(10, 10, 400);
  }
  EXPECT_GT(by_worker, 0u) << "no worker sent anything in three runs: no overlap";
}

// The same at 100/s, where a second of refill is a hundred requests.
TEST(Seed001Drain, BesideFourOfTheShapesOwnWorkersAFastPartnersBucketHolds) {
  std::size_t by_worker = 0;
  for (int run = 0; run < 3 && by_worker == 0 && !::testing::Test::HasFailure(); ++run) {
    by_worker = run_beside_the_workers(100, 10, 1200);
  }
  EXPECT_GT(by_worker, 0u) << "no worker sent anything in three runs: no overlap";
}

}  // namespace
}  // namespace surge::testing
