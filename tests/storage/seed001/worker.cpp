// surge_seed001_worker: a stand-in for the seed001 shape's own PHP worker, for tests. It runs
// only that worker's statements (worker_sql.hpp) on the shape's columns, so a passing
// run proves the worker still works on a file Surge has migrated and is draining.
//
//   surge_seed001_worker --db PATH [--lease 30] [--duration 10] [--sent FILE]
//
// One cron tick: until --duration seconds have passed it leases up to 50 due rows (whole-second
// times, as PHP's time() gives them; the grab returns the rows it leased, so that several
// workers at once never send one row twice), takes one token per row from webhook_buckets in its
// own transaction (SELECT, then INSERT or UPDATE), "sends" the row by appending "subscriber_id
// delivery_id unix_time" to --sent and marks it delivered; a row whose bucket is empty goes back 2
// s later without an attempt. A bucket transaction that fails with SQLITE_BUSY is run again, as
// cron would start the program again.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>
#include <sqlite3.h>

#include "tests/storage/seed001/worker_sql.hpp"

namespace {

namespace sql = surge::seed001_worker_sql;

struct options {
  std::string db;
  std::int64_t lease = 30;
  double duration = 10;
  std::string sent;
};

int usage(const char* message) {
  std::cerr << "surge_seed001_worker: " << message << "\n"
            << "usage: surge_seed001_worker --db PATH [--lease SECONDS] [--duration SECONDS] "
               "[--sent FILE]\n";
  return 2;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// PHP's time().
std::int64_t whole_now() { return static_cast<std::int64_t>(std::floor(unix_now())); }

struct leased {
  std::int64_t id = 0;
  std::int64_t subscriber_id = 0;
};

// The worker's bucket transaction for one row: true when it took a token.
bool take_token(SQLite::Database& db, std::int64_t subscriber) {
  SQLite::Transaction transaction(db);  // PDO's beginTransaction(): DEFERRED
  SQLite::Statement limits(db, sql::read_limits);
  limits.bind(":id", subscriber);
  if (!limits.executeStep()) return false;
  const double rate = limits.getColumn(0).getDouble() / 60.0;
  const double burst = limits.getColumn(1).getDouble();
  SQLite::Statement bucket(db, sql::read_bucket);
  bucket.bind(":id", subscriber);
  const double now = unix_now();  // microtime(true)
  const bool exists = bucket.executeStep();
  const double tokens =
      exists ? std::min(burst, bucket.getColumn(0).getDouble() +
                                   std::max(0.0, now - bucket.getColumn(1).getDouble()) * rate)
             : burst;
  if (tokens < 1.0) return false;  // nothing written: the transaction ends without a change
  SQLite::Statement write(db, exists ? sql::update_bucket : sql::insert_bucket);
  write.bind(":id", subscriber);
  write.bind(":tokens", tokens - 1.0);
  write.bind(":at", now);
  write.exec();
  transaction.commit();
  return true;
}

int run(const options& opt) {
  SQLite::Database db(opt.db, SQLite::OPEN_READWRITE, 5000);
  std::ofstream sent;
  if (!opt.sent.empty()) sent.open(opt.sent, std::ios::app);
  SQLite::Statement grab(db, sql::lease_grab_returning);
  SQLite::Statement delivered(db, sql::mark_delivered);
  SQLite::Statement reschedule(db, sql::reschedule);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(opt.duration);
  while (std::chrono::steady_clock::now() < end) {
    const std::int64_t now = whole_now();
    const std::int64_t until = now + opt.lease;
    grab.reset();
    grab.bind(":until", until);
    grab.bind(":now", now);
    std::vector<leased> rows;
    while (grab.executeStep()) {
      rows.push_back({grab.getColumn(0).getInt64(), grab.getColumn(1).getInt64()});
    }
    for (const auto& row : rows) {
      bool token = false;
      for (;;) {
        try {
          token = take_token(db, row.subscriber_id);
          break;
        } catch (const SQLite::Exception& error) {
          if (error.getErrorCode() != SQLITE_BUSY) throw;
        }
      }
      if (!token) {
        reschedule.reset();
        reschedule.bind(":now", whole_now());
        reschedule.bind(":id", row.id);
        reschedule.exec();
        continue;
      }
      if (sent.is_open()) {
        sent << row.subscriber_id << ' ' << row.id << ' ' << std::fixed << unix_now() << '\n';
        sent.flush();
      }
      delivered.reset();
      delivered.bind(":id", row.id);
      delivered.exec();
    }
    if (rows.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (i + 1 >= argc) return usage("missing value");
    const char* text = argv[++i];
    if (arg == "--db") {
      opt.db = text;
    } else if (arg == "--lease") {
      opt.lease = std::atoll(text);
    } else if (arg == "--duration") {
      opt.duration = std::atof(text);
    } else if (arg == "--sent") {
      opt.sent = text;
    } else {
      return usage("unknown argument");
    }
  }
  if (opt.db.empty()) return usage("--db is required");
  if (opt.lease <= 0) return usage("--lease must be positive");
  try {
    return run(opt);
  } catch (const std::exception& error) {
    std::cerr << "surge_seed001_worker: " << error.what() << "\n";
    return 1;
  }
}
