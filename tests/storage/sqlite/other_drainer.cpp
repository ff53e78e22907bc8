// surge_other_drainer: a stand-in for the steady-state PHP drainer, for tests and experiments.
// It runs only the old program's statements (other_drainer_sql.hpp) on the base columns, so a
// passing run proves the old program still works on a file Surge has migrated and is draining.
//
//   surge_other_drainer --db PATH [--batch 200] [--lease 30] [--subscribers 1,2] [--out FILE]
//                       [--sleep-ms N] [--until-empty] [--exit-after-claim]
//                       [--paced --sent FILE]
//
// --paced: each row waits for a token of its subscriber's persisted bucket and is finished in
// the drainer's own DEFERRED bucket transaction (SELECT, then UPDATE); a transaction that fails
// with SQLITE_BUSY is run again, as cron would restart the program. --sent appends
// "subscriber_id unix_time" per row sent.
#include <algorithm>
#include <chrono>
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

#include "tests/storage/sqlite/other_drainer_sql.hpp"

namespace {

namespace sql = surge::other_drainer_sql;

struct options {
  std::string db;
  int batch = 200;
  double lease = 30;
  std::string subscribers;  // validated "1,2,3" or empty
  std::string out;
  int sleep_ms = 0;
  bool until_empty = false;
  bool exit_after_claim = false;
  bool paced = false;
  std::string sent;
};

bool is_id_list(std::string_view text) {
  if (text.empty() || text.front() == ',' || text.back() == ',') return false;
  if (text.find(",,") != std::string_view::npos) return false;
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return c == ',' || (c >= '0' && c <= '9'); });
}

int usage(const char* message) {
  std::cerr << "surge_other_drainer: " << message << "\n"
            << "usage: surge_other_drainer --db PATH [--batch N] [--lease SECONDS] "
               "[--subscribers 1,2] [--out FILE] [--sleep-ms N] [--until-empty] "
               "[--exit-after-claim] [--paced --sent FILE]\n";
  return 2;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct claimed {
  std::int64_t id = 0;
  std::int64_t subscriber_id = 0;
};

// Takes one token from the persisted bucket, refilled for the time since it was last written.
// The stand-in never waits for tokens: it exists to exercise the shared SQL, not to pace sends.
void consume_token(SQLite::Statement& read, SQLite::Statement& write, std::int64_t subscriber,
                   double now) {
  read.reset();
  read.bind(1, subscriber);
  if (!read.executeStep()) return;
  const double tokens = read.getColumn(0).getDouble();
  const double updated_at = read.getColumn(1).getDouble();
  const double rate = read.getColumn(2).getDouble();
  const double burst = read.getColumn(3).getDouble();
  const double refilled = std::min(burst, tokens + std::max(0.0, now - updated_at) * rate);
  read.reset();
  write.reset();
  write.bind(1, std::max(0.0, refilled - 1.0));
  write.bind(2, now);
  write.bind(3, subscriber);
  write.exec();
}

// The steady-state drainer's own way of spending a token: a DEFERRED transaction that reads the
// bucket, and writes it (with the row's outcome) only when a whole token is there. Returns the
// wait before the next token when there was none, zero once the row is done.
std::chrono::duration<double> spend_paced(SQLite::Database& db, SQLite::Statement& read,
                                          SQLite::Statement& write, SQLite::Statement& mark_done,
                                          const claimed& row) {
  const double now = unix_now();
  SQLite::Transaction transaction(db);
  read.reset();
  read.bind(1, row.subscriber_id);
  if (!read.executeStep()) return std::chrono::duration<double>(0);
  const double tokens = read.getColumn(0).getDouble();
  const double updated_at = read.getColumn(1).getDouble();
  const double rate = read.getColumn(2).getDouble();
  const double burst = read.getColumn(3).getDouble();
  read.reset();
  const double refilled = std::min(burst, tokens + std::max(0.0, now - updated_at) * rate);
  if (refilled < 1.0) {
    return std::chrono::duration<double>(rate > 0 ? (1.0 - refilled) / rate : 0.1);
  }
  write.reset();
  write.bind(1, refilled - 1.0);
  write.bind(2, now);
  write.bind(3, row.subscriber_id);
  write.exec();
  mark_done.reset();
  mark_done.bind(1, row.id);
  mark_done.exec();
  transaction.commit();
  return std::chrono::duration<double>(0);
}

int run(const options& opt) {
  SQLite::Database db(opt.db, SQLite::OPEN_READWRITE, 5000);
  SQLite::Statement claim(db, sql::claim(opt.subscribers));
  SQLite::Statement read_back(db, sql::read_back);
  SQLite::Statement read_bucket(db, sql::read_bucket);
  SQLite::Statement write_bucket(db, sql::write_bucket);
  SQLite::Statement mark_done(db, sql::mark_done);
  std::ofstream out;
  if (!opt.out.empty()) out.open(opt.out, std::ios::app);
  std::ofstream sent;
  if (!opt.sent.empty()) sent.open(opt.sent, std::ios::app);
  std::int64_t busy = 0;

  for (;;) {
    const double now = unix_now();
    const double lease = now + opt.lease;
    {
      SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
      claim.reset();
      claim.bind(1, lease);
      claim.bind(2, now);
      claim.bind(3, now);
      claim.bind(4, opt.batch);
      claim.exec();
      transaction.commit();
    }
    std::vector<claimed> rows;
    read_back.reset();
    read_back.bind(1, lease);
    while (read_back.executeStep()) {
      rows.push_back({read_back.getColumn(0).getInt64(), read_back.getColumn(1).getInt64()});
    }
    read_back.reset();
    if (out.is_open()) {
      for (const auto& row : rows) out << row.id << '\n';
      out.flush();
    }
    if (opt.exit_after_claim) return 0;  // as if killed mid-send: the rows stay leased
    if (rows.empty()) {
      if (opt.until_empty) {
        if (opt.paced) std::cerr << "busy " << busy << "\n";
        return 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(opt.sleep_ms > 0 ? opt.sleep_ms : 200));
      continue;
    }
    if (opt.paced) {
      for (const auto& row : rows) {
        for (;;) {
          std::chrono::duration<double> wait{0.001};
          try {
            wait = spend_paced(db, read_bucket, write_bucket, mark_done, row);
          } catch (const SQLite::Exception& error) {
            if (error.getErrorCode() != SQLITE_BUSY) throw;
            ++busy;  // the PHP program would die here; cron starts it again
            continue;
          }
          if (wait.count() <= 0) break;
          std::this_thread::sleep_for(std::min(wait, std::chrono::duration<double>(0.1)));
        }
        if (sent.is_open()) {
          sent << row.subscriber_id << ' ' << std::fixed << unix_now() << '\n';
          sent.flush();
        }
      }
      continue;
    }
    {
      SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
      for (const auto& row : rows) {
        consume_token(read_bucket, write_bucket, row.subscriber_id, now);
        mark_done.reset();
        mark_done.bind(1, row.id);
        mark_done.exec();
      }
      transaction.commit();
    }
    if (opt.sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(opt.sleep_ms));
  }
}

}  // namespace

int main(int argc, char** argv) {
  options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (arg == "--until-empty") {
      opt.until_empty = true;
    } else if (arg == "--exit-after-claim") {
      opt.exit_after_claim = true;
    } else if (arg == "--paced") {
      opt.paced = true;
    } else if (arg == "--db" || arg == "--batch" || arg == "--lease" || arg == "--subscribers" ||
               arg == "--out" || arg == "--sleep-ms" || arg == "--sent") {
      const char* text = value();
      if (text == nullptr) return usage("missing value");
      if (arg == "--db") opt.db = text;
      if (arg == "--batch") opt.batch = std::atoi(text);
      if (arg == "--lease") opt.lease = std::atof(text);
      if (arg == "--subscribers") opt.subscribers = text;
      if (arg == "--out") opt.out = text;
      if (arg == "--sleep-ms") opt.sleep_ms = std::atoi(text);
      if (arg == "--sent") opt.sent = text;
    } else {
      return usage("unknown argument");
    }
  }
  if (opt.db.empty()) return usage("--db is required");
  if (opt.batch <= 0) return usage("--batch must be positive");
  if (!opt.subscribers.empty() && !is_id_list(opt.subscribers)) {
    return usage("--subscribers takes a comma-separated list of ids");
  }
  try {
    return run(opt);
  } catch (const std::exception& error) {
    std::cerr << "surge_other_drainer: " << error.what() << "\n";
    return 1;
  }
}
