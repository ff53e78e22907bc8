// The drain's storage on a SQLite file: the embedded default. One connection
// claims and writes; checkpoints run on their own connection and thread (storage/checkpointer).
// What differs between the queue shapes comes from storage/sqlite/queue_shape.hpp.
#include <sys/statvfs.h>

#include <cstdint>
#include <filesystem>

#include <sqlite3.h>

#include <SQLiteCpp/Exception.h>
#include <SQLiteCpp/Statement.h>

#include "storage/drain_store.hpp"
#include "storage/queue_backend.hpp"
#include "storage/sqlite/checkpointer.hpp"
#include "storage/sqlite/cycle.hpp"
#include "storage/sqlite/database.hpp"
#include "storage/sqlite/maintenance.hpp"
#include "storage/sqlite/queue_shape.hpp"
#include "storage/sqlite/ownership.hpp"
#include "storage/sqlite/partner_quotas.hpp"
#include "storage/sqlite/queue.hpp"
#include "storage/sqlite/schema.hpp"
#include "storage/sqlite/wal_meter.hpp"

namespace surge::storage::sqlite {
namespace {

// Free bytes on the file system holding `path`; the most it could be when that is unknown.
std::uint64_t free_bytes_beside(const std::string& path) {
  const auto directory = std::filesystem::absolute(path).parent_path();
  struct statvfs info {};
  if (::statvfs(directory.c_str(), &info) != 0) return UINT64_MAX;
  return static_cast<std::uint64_t>(info.f_bavail) * info.f_frsize;
}

int page_bytes_of(SQLite::Database& db) { return db.execAndGet("PRAGMA page_size").getInt(); }

class sqlite_drain_store final : public drain_store {
  // Defined first: its return type is deduced, so it must be seen before its callers.
  template <class Work>
  decltype(auto) translated(Work&& work) {
    try {
      return work();
    } catch (const SQLite::Exception& failure) {
      auto translated_error = from_sqlite(failure);
      // A full disk may be full of WAL: a checkpoint copies it into the file, the WAL then
      // starts over in the space it already has, and the caller's retry can succeed.
      if (translated_error.what_kind() == error::kind::disk_full) checkpoints_.request();
      throw translated_error;
    }
  }

 public:
  explicit sqlite_drain_store(const drain_store_config& config)
      : db_(open_database({.path = config.location,
                           .busy_timeout = config.busy_timeout,
                           .create_if_missing = false,
                           .cache_kib = config.cache_kib,
                           .lock_wait = config.lock_wait})),
        path_(config.location),
        file_(identify_file(config.location)),
        shape_(sqlite_shape_of(shape_of_file(db_, config.shape, config.location))),
        checkpoints_(config.location),
        claims_(db_, config.owner.empty() ? default_lease_owner() : config.owner, shape_.claims),
        writer_(shape_.make_writer(db_)),
        tokens_(db_, config.token_reserve_seconds, shape_.buckets),
        owners_(db_, claims_.owner(), config.allowed, config.ownership_heartbeat_seconds,
                shape_.deliveries.subscriber_table),
        wal_(db_, {.checkpoint_frames = checkpoint_frames_for(
                       static_cast<int>(config.checkpoint_frames),
                       free_bytes_beside(config.location), page_bytes_of(db_)),
                   .checkpoint_on_commit = false}),
        changes_(db_, change_watch_rows, shape_.new_rows) {
    wal_.on_checkpoint_wanted([this] { checkpoints_.request(); });
    // SQLite opens a file it may not write read-only without a word; the drain would then fail
    // every write for as long as it ran.
    if (sqlite3_db_readonly(db_.getHandle(), "main") == 1) {
      throw error(with_remedy(error("it was opened read-only: this user may not write the file",
                                    error::kind::read_only),
                              config.location),
                  error::kind::read_only);
    }
  }

  const std::string& owner() const override { return claims_.owner(); }

  cycle_result write_and_claim(std::span<const outcome> outcomes,
                               std::span<const std::int64_t> deactivate,
                               std::span<const subscriber_demand> demand, double now,
                               double lease_seconds, std::int64_t max_payload_bytes) override {
    return translated([&] {
      return sqlite::write_and_claim(db_, *writer_, claims_, tokens_, outcomes, deactivate, demand,
                                     now, lease_seconds, max_payload_bytes, &owners_);
    });
  }
  write_report write_outcomes(std::span<const outcome> outcomes,
                              std::span<const std::int64_t> deactivate) override {
    return translated([&] { return writer_->write(outcomes, deactivate); });
  }
  void give_back_tokens(std::span<const unspent_tokens> tokens, double now) override {
    translated([&] { sqlite::give_back_tokens(db_, tokens, now, shape_.buckets); });
  }
  void record_partner_quotas(std::span<const partner_quota_row> rows) override {
    translated([&] { sqlite::record_partner_quotas(db_, rows); });
  }
  std::vector<subscriber_row> load_subscribers(const proto::id_set& which) override {
    return translated([&] { return shape_.deliveries.load_subscribers(db_, which); });
  }
  std::int64_t dead_letter_orphans(double now, const proto::id_set& which) override {
    return translated(
        [&] { return sqlite::dead_letter_orphans(db_, now, which, shape_.deliveries); });
  }
  malformed_rows dead_letter_malformed(double now, double lease_horizon,
                                       const proto::id_set& which) override {
    return translated([&] {
      return sqlite::dead_letter_malformed(db_, now, lease_horizon, which, shape_.deliveries);
    });
  }
  std::int64_t count_outstanding(double now, const proto::id_set& which) override {
    return translated(
        [&] { return sqlite::count_outstanding(db_, now, which, shape_.deliveries); });
  }
  std::optional<double> earliest_scheduled(double now, const proto::id_set& which) override {
    return translated(
        [&] { return sqlite::earliest_scheduled(db_, now, which, shape_.deliveries); });
  }
  void ping() override {
    translated([&] { db_.execAndGet("SELECT COUNT(*) FROM surge_schema_version"); });
  }
  std::string missing_file() override {
    // SQLite keeps writing to a file that was deleted or renamed over.
    if (file_ && identify_file(path_) != file_) {
      return "the queue file " + path_ + " was deleted or replaced while draining";
    }
    // ... and to a write-ahead log that was: the other programs' connections then fail with
    // "disk I/O error", and what this one commits after the last checkpoint would be lost.
    const auto log = identify_file(path_ + "-wal");
    if (!log_) {
      log_ = log;
    } else if (log != log_) {
      log_lost_ = true;
      return "the queue's write-ahead log " + path_ +
             "-wal was deleted or replaced while "
             "draining (every other program's write to the queue fails meanwhile)";
    }
    return {};
  }
  std::string rescue_lost_log() override {
    // This connection still has the deleted log open: a checkpoint through it copies every
    // committed page into the queue file, which no longer needs the log.
    if (!log_lost_) return {};
    try {
      SQLite::Statement checkpoint(db_, "PRAGMA wal_checkpoint(TRUNCATE)");
      if (!checkpoint.executeStep()) return "the final checkpoint returned nothing";
      const int busy = checkpoint.getColumn(0).getInt();
      const int frames = checkpoint.getColumn(1).getInt();
      const int copied = checkpoint.getColumn(2).getInt();
      if (busy == 0 && frames == copied) {
        return "a final checkpoint copied the " + std::to_string(copied) +
               " pages this drain still held of the deleted log into the queue file; no outcome "
               "was lost";
      }
      return "a final checkpoint copied " + std::to_string(std::max(copied, 0)) + " of " +
             std::to_string(frames) + " pages of the deleted log into the queue file" +
             (busy != 0 ? " (another connection held it)" : "") +
             "; outcomes in the others are lost and those rows will be sent again";
    } catch (const SQLite::Exception& failure) {
      return std::string("the final checkpoint of the deleted log failed (") + failure.what() +
             "); outcomes written since the last checkpoint are lost and those rows will be "
             "sent again";
    }
  }
  new_rows check_new_rows(double now) override {
    return translated([&] { return changes_.check(now); });
  }
  ownership_change renew_ownership(double now) override {
    return translated([&] { return owners_.renew(now); });
  }
  std::size_t owned_count(double now) const override { return owners_.owned_count(now); }
  void release_ownership() override {
    translated([&] { owners_.release_all(); });
  }
  write_counters counters() const override { return {wal_.commits(), wal_.frames()}; }

 private:
  // Rows one look of the new-row watch reads at most (more wake every subscriber).
  static constexpr std::size_t change_watch_rows = 10000;

  SQLite::Database db_;
  std::string path_;
  std::optional<file_identity> file_;  // what the path named when it was opened
  const sqlite_queue_shape& shape_;    // what differs between queue shapes
  std::optional<file_identity> log_;   // its write-ahead log, once seen
  bool log_lost_ = false;              // ... and found deleted or replaced since
  checkpointer checkpoints_;           // before `wal_`, whose hook calls it
  claimer claims_;
  std::unique_ptr<outcome_applier> writer_;
  token_leaser tokens_;
  ownership_keeper owners_;
  wal_meter wal_;
  change_watch changes_;  // rows other connections queue, for the wake
};

}  // namespace

std::unique_ptr<drain_store> open_drain_store(const drain_store_config& config) {
  try {
    return std::make_unique<sqlite_drain_store>(config);
  } catch (const SQLite::Exception& failure) {
    const auto translated = from_sqlite(failure);
    throw error(with_remedy(translated, config.location), translated.what_kind());
  }
}

}  // namespace surge::storage::sqlite
