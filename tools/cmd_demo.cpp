// surge demo: a viral spike drained end to end on a local queue file, against `surge sink`.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "engine/drain.hpp"
#include "engine/observe/log.hpp"
#include "proto/clock.hpp"
#include "storage/connection.hpp"
#include "storage/database.hpp"
#include "storage/queue.hpp"
#include "storage/schema.hpp"
#include "storage/subscribers.hpp"
#include "tools/commands.hpp"
#include "tools/drain_options.hpp"
#include "tools/file_limit.hpp"
#include "tools/process.hpp"

namespace surge::tools {

namespace {

struct demo_subscriber {
  const char* name;
  const char* events;
  double rate;
  std::int64_t burst;
  const char* signing;
  const char* secret;
  std::int64_t batch = 1;
  const char* coalesce = "";  // JSON pointer; rank updates of one video merge
};

// Limits differ on purpose: an unthrottled sink, a fast dashboard, a slow cache warmer that
// only needs each video's latest rank (coalesced), a per-minute partner that catches up in
// batches, one endpoint that fails often and one that always fails.
constexpr demo_subscriber demo_subscribers[] = {
    {"analytics", "*", 2000, 200, "vvv", "demo-secret-analytics"},
    {"dashboard", "video.*", 400, 40, "standard", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
    {"cache-warmer", "video.trending, video.rank_updated", 80, 10, "vvv", "demo-secret-cache", 1,
     "/video_id"},
    {"partner-per-minute", "video.rank_updated", 120.0 / 60.0, 5, "vvv", "demo-secret-partner", 50},
    {"flaky", "video.trending, video.velocity_changed", 500, 50, "vvv", "demo-secret-flaky"},
    {"broken", "video.rank_updated", 20, 5, "standard", "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"},
};
constexpr int demo_videos = 60;
constexpr int demo_rank_updates = 5;  // per video

const char* demo_behaviours = R"({
  "5": {"mix": [[200, 0.7], [500, 0.3]]},
  "6": {"status": 500}
})";

struct demo_options {
  std::string dir;
  int scale = 1;
  bool keep = false;
};

struct sink_counts {
  std::map<std::string, int> verdicts;
  std::map<std::int64_t, int> requests;  // per subscriber
};

// The sink's record: subscriber is column 2 and the verdict column 5 (docs/cli.md); no field
// before the verdict is ever quoted.
sink_counts count_record(const std::string& record_path) {
  sink_counts counts;
  std::ifstream in(record_path);
  std::string line;
  while (std::getline(in, line)) {
    std::stringstream fields(line);
    std::string field;
    for (int i = 0; i < 5 && std::getline(fields, field, ','); ++i) {
      if (i == 1) ++counts.requests[std::atoll(field.c_str())];
    }
    ++counts.verdicts[field];
  }
  return counts;
}

}  // namespace

void add_demo_command(CLI::App& app, command_action& action) {
  auto* cmd = app.add_subcommand(
      "demo", "Create a queue with a viral spike, start `surge sink`, drain it and report.");
  auto opts = std::make_shared<demo_options>();
  cmd->add_option("--dir", opts->dir,
                  "Working directory for the queue file and sink records "
                  "(default: a new temporary directory)");
  cmd->add_option("--scale", opts->scale, "Multiply the spike's size")->check(CLI::Range(1, 100));
  cmd->add_flag("--keep", opts->keep, "Keep the working directory");
  cmd->callback([&action, opts] {
    action = [opts] {
      namespace fs = std::filesystem;
      fs::path dir = opts->dir;
      if (dir.empty()) {
        std::string pattern = (fs::temp_directory_path() / "surge-demo-XXXXXX").string();
        if (!::mkdtemp(pattern.data())) throw std::runtime_error("cannot create a temp dir");
        dir = pattern;
      }
      fs::create_directories(dir);
      const auto db_path = (dir / "queue.db").string();
      fs::remove(db_path);
      { std::ofstream(dir / "behaviours.json") << demo_behaviours; }
      storage::connection db({.location = db_path});
      storage::migrate(db, true);

      std::cout << "demo: working in " << dir.string() << std::endl;
      const auto port_file = (dir / "sink.port").string();
      fs::remove(port_file);
      child_process sink(self_executable(),
                         {"sink", "--listen", "127.0.0.1:0", "--db", db_path, "--port-file",
                          port_file, "--behaviours", (dir / "behaviours.json").string(), "--record",
                          (dir / "sink.csv").string()},
                         (dir / "sink.out").string(), (dir / "sink.err").string());
      const auto port = wait_for_file(port_file, std::chrono::seconds(10));
      if (!port)
        throw std::runtime_error("surge sink did not start; see " + (dir / "sink.err").string());
      const std::string base =
          "http://127.0.0.1:" + std::string(port->substr(0, port->find('\n'))) + "/hook/";

      std::int64_t id = 0;
      for (const auto& s : demo_subscribers) {
        storage::subscriber_row row;
        row.id = ++id;
        row.url = base + std::to_string(id);
        row.secret = s.secret;
        row.event_types = s.events;
        row.rate_per_sec = s.rate;
        row.burst = s.burst;
        row.tokens = static_cast<double>(s.burst);
        row.signing = s.signing;
        row.batch_max = s.batch;
        row.coalesce_key = s.coalesce;
        row.coalesce_events = "video.rank_updated";
        storage::add_subscriber(db, row);
        std::printf("  subscriber %lld %-19s %8.2f/s burst %-4lld %-8s events %s",
                    static_cast<long long>(id), s.name, s.rate, static_cast<long long>(s.burst),
                    s.signing, s.events);
        if (s.batch > 1) std::printf(" (batches of %lld)", static_cast<long long>(s.batch));
        if (*s.coalesce) std::printf(" (rank updates coalesced by %s)", s.coalesce);
        std::printf("\n");
      }
      std::fflush(stdout);
      const double now = proto::unix_now();
      const int scale = opts->scale;
      std::int64_t rows = 0;
      rows += storage::emit_event(db, "video.trending", R"({"video_id":"v1","views":1048576})", now,
                                  400 * scale);
      rows += storage::emit_event(db, "video.velocity_changed",
                                  R"({"video_id":"v1","velocity":42.5})", now, 1200 * scale);
      // Each video's rank changes several times within seconds: the cache warmer needs only the
      // latest, the per-minute partner takes them all, in batches.
      for (int update = 0; update < demo_rank_updates; ++update) {
        for (int video = 0; video < demo_videos; ++video) {
          const std::string payload = R"({"video_id":"v)" + std::to_string(video) + R"(","rank":)" +
                                      std::to_string(update + 1) + "}";
          rows += storage::emit_event(db, "video.rank_updated", payload, now, scale);
        }
      }
      std::cout << "demo: queued " << rows << " deliveries; draining" << std::endl;

      drain_cli_options drain;
      drain.db_path = db_path;
      drain.until_drained = true;
      drain.until_drained_wait = 5;  // let the flaky endpoint's retries finish
      drain.allow_private_targets = true;
      drain.retry_base = 0.2;
      drain.retry_cap = 2;
      drain.max_attempts = 4;
      drain.progress_interval = 2;
      auto config = to_drain_config(drain);
      if (const auto lowered =
              fit_connections_to_file_limit(config, engine::shard_count(config), false);
          !lowered.empty()) {
        engine::log_warn(lowered);
      }
      const auto summary = engine::run_drain(config);
      sink.stop();

      const auto stats = storage::read_stats(db, proto::unix_now());
      const auto received = count_record((dir / "sink.csv").string());
      std::printf("\n%-12s %8s %10s %8s %8s %8s %10s\n", "subscriber", "done", "coalesced", "dead",
                  "retry", "pending", "requests");
      for (const auto& s : stats.per_subscriber) {
        const auto requests = received.requests.find(s.subscriber_id);
        std::printf("%-12lld %8lld %10lld %8lld %8lld %8lld %10d\n",
                    static_cast<long long>(s.subscriber_id), static_cast<long long>(s.done),
                    static_cast<long long>(s.coalesced), static_cast<long long>(s.dead),
                    static_cast<long long>(s.retry), static_cast<long long>(s.pending),
                    requests == received.requests.end() ? 0 : requests->second);
      }
      std::cout << "\nsink verdicts:";
      for (const auto& [verdict, n] : received.verdicts) std::cout << " " << verdict << "=" << n;
      std::cout << "\n";
      print_drain_summary(summary);
      // The always-failing endpoint ends behind an open circuit: its rows stay queued for a later
      // drain instead of holding this one open. Everything else must be finished.
      const auto& broken = stats.per_subscriber.back();
      const auto left = stats.total.pending + stats.total.retry;
      const auto left_broken = broken.pending + broken.retry;
      if (left_broken > 0) {
        std::cout << "demo: " << left_broken << " rows of subscriber " << broken.subscriber_id
                  << " (always failing) are left queued behind its open circuit\n";
      }
      const bool ok = left == left_broken && stats.total.done > 0 && stats.total.leased == 0;
      if (!opts->keep && opts->dir.empty()) fs::remove_all(dir);
      return ok ? exit_ok : exit_failure;
    };
  });
}

}  // namespace surge::tools
