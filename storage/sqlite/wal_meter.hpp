#pragma once
// What one connection writes to the WAL, counted per commit, and when the WAL wants a checkpoint.
// Installing the meter replaces SQLite's own autocheckpoint (both use sqlite3_wal_hook), so the
// owner decides where checkpoints run: Surge keeps them off the commit path.
#include <atomic>
#include <cstdint>
#include <functional>

#include <SQLiteCpp/Database.h>

namespace surge::storage::sqlite {

struct wal_meter_config {
  // A WAL this many frames long asks for a checkpoint (SQLite's autocheckpoint default).
  int checkpoint_frames = 1000;
  // true: the commit that crosses checkpoint_frames runs a passive checkpoint itself, exactly
  // what SQLite's autocheckpoint does. false: only on_checkpoint_wanted is called.
  bool checkpoint_on_commit = true;
};

// The WAL length at which a checkpoint is wanted, given the room left on the queue's disk: the
// configured length, or a quarter of the free space if that is less (but at least
// `min_checkpoint_frames`), so a long threshold on a nearly full disk cannot fill it with WAL
// frames the next checkpoint would have made reusable.
inline constexpr int min_checkpoint_frames = 100;
int checkpoint_frames_for(int configured, std::uint64_t free_bytes, int page_bytes);

class wal_meter {
 public:
  // `db` must outlive the meter; the hook runs on whatever thread commits on `db`.
  wal_meter(SQLite::Database& db, wal_meter_config config);
  ~wal_meter();
  wal_meter(const wal_meter&) = delete;
  wal_meter& operator=(const wal_meter&) = delete;

  // Called from the hook (the committing thread) when the WAL has reached checkpoint_frames.
  // It must be cheap and must not use the connection.
  void on_checkpoint_wanted(std::function<void()> callback) { wanted_ = std::move(callback); }

  // Commits on this connection that wrote frames, and the frames they wrote (pages). A frame
  // count is the growth of the WAL at each commit (the whole WAL after a restart), so a commit
  // by another connection between two of ours is counted with ours; with one writer it is exact.
  std::int64_t commits() const { return commits_.load(std::memory_order_relaxed); }
  std::int64_t frames() const { return frames_.load(std::memory_order_relaxed); }
  // Frames in the WAL after the last commit on this connection.
  int wal_frames() const { return last_wal_frames_.load(std::memory_order_relaxed); }

 private:
  static int hook(void* self, sqlite3* handle, const char* schema, int wal_frames);

  SQLite::Database& db_;
  wal_meter_config config_;
  std::function<void()> wanted_;
  std::atomic<std::int64_t> commits_{0};
  std::atomic<std::int64_t> frames_{0};
  std::atomic<int> last_wal_frames_{0};
};

}  // namespace surge::storage::sqlite
