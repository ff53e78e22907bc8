#pragma once
// WAL checkpoints on a connection and a thread of their own: the storage thread's
// commits never copy WAL pages into the main file nor wait for its fsync. A passive checkpoint
// takes no write lock, so neither the drain nor the steady-state drainer waits for it.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include <SQLiteCpp/Database.h>

namespace surge::storage::sqlite {

class checkpointer {
 public:
  // Opens its own connection to `path` (throws SQLite::Exception, at start-up) and its thread.
  explicit checkpointer(const std::string& path);
  // Stops the thread; a checkpoint under way finishes first.
  ~checkpointer();
  checkpointer(const checkpointer&) = delete;
  checkpointer& operator=(const checkpointer&) = delete;

  // Thread-safe and cheap (a WAL hook calls it after a commit): checkpoint soon.
  void request();
  // Passive checkpoints run so far.
  std::int64_t runs() const { return runs_.load(std::memory_order_relaxed); }

 private:
  void run();

  SQLite::Database db_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool wanted_ = false;
  bool stopping_ = false;
  std::atomic<std::int64_t> runs_{0};
  std::thread thread_;  // last: starts once everything above exists
};

}  // namespace surge::storage::sqlite
