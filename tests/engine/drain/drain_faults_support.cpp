#include "tests/engine/drain/drain_faults_support.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include <SQLiteCpp/Statement.h>

#include "proto/clock.hpp"
#include "storage/sqlite/database.hpp"

namespace surge::testing {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

std::vector<std::string> fast_drain(const test_queue& queue, std::vector<std::string> extra,
                                    const timeouts& limits) {
  std::vector<std::string> args{"drain",
                                "--db",
                                queue.path(),
                                "--until-drained",
                                "--until-drained-wait",
                                "5",
                                "--allow-private-targets",
                                "--progress-interval",
                                "0",
                                "--connect-timeout",
                                limits.connect,
                                "--attempt-timeout",
                                limits.attempt,
                                "--lease",
                                limits.lease,
                                "--retry-base",
                                "0.2",
                                "--retry-cap",
                                "0.4"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::int64_t subscriber_at(test_queue& queue, const sink_process& sink, double rate, int burst) {
  return queue.add_subscriber_at(sink, rate, burst);
}

std::vector<attempt_record> attempts_of(test_queue& queue, std::int64_t delivery_id) {
  SQLite::Statement query(queue.db(),
                          "SELECT attempt, finished_at - started_at, status_code, error_class "
                          "FROM surge_attempt WHERE delivery_id = ? ORDER BY started_at");
  query.bind(1, delivery_id);
  std::vector<attempt_record> out;
  while (query.executeStep()) {
    attempt_record record;
    record.attempt = query.getColumn(0).getInt64();
    record.seconds = query.getColumn(1).getDouble();
    record.status = query.getColumn(2).isNull() ? 0 : query.getColumn(2).getInt();
    record.error_class = query.getColumn(3).getString();
    out.push_back(std::move(record));
  }
  return out;
}

void drop_option(std::vector<std::string>& args, const std::string& flag) {
  const auto found = std::find(args.begin(), args.end(), flag);
  if (found != args.end()) args.erase(found, found + 2);
}

std::vector<sink_request> of_delivery(const std::vector<sink_request>& all, std::int64_t id) {
  std::vector<sink_request> out;
  for (const auto& request : all) {
    if (request.delivery_id == id) out.push_back(request);
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.arrival < b.arrival; });
  return out;
}

std::set<std::int64_t> leased_rows(test_queue& queue) {
  SQLite::Statement query(queue.db(),
                          "SELECT id FROM webhook_delivery WHERE locked_until > ? "
                          "AND status IN ('pending', 'retry')");
  query.bind(1, proto::unix_now());
  std::set<std::int64_t> out;
  while (query.executeStep()) out.insert(query.getColumn(0).getInt64());
  return out;
}

std::vector<sink_request> record_so_far(const sink_process& sink) {
  std::this_thread::sleep_for(250ms);
  return read_sink_record(sink.record_path());
}

bool wait_for_requests(const sink_process& sink, std::size_t count,
                       std::chrono::milliseconds timeout) {
  const auto give_up = steady::now() + timeout;
  while (steady::now() < give_up) {
    if (read_sink_record(sink.record_path()).size() >= count) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

bool wait_until_stopped(pid_t pid) {
  const auto give_up = steady::now() + 2s;
  while (steady::now() < give_up) {
    bool all_stopped = true;
    const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
    for (const auto& task : std::filesystem::directory_iterator(tasks)) {
      std::ifstream stat(task.path() / "stat");
      std::string line;
      std::getline(stat, line);
      // "pid (comm) S ...": the state follows the last ')'.
      const auto close = line.rfind(')');
      if (close == std::string::npos || close + 2 >= line.size() || line[close + 2] != 'T') {
        all_stopped = false;
      }
    }
    if (all_stopped) return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

}  // namespace surge::testing
