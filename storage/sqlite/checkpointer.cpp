#include "storage/sqlite/checkpointer.hpp"

#include <pthread.h>

#include <sqlite3.h>

#include "storage/sqlite/database.hpp"

namespace surge::storage::sqlite {

checkpointer::checkpointer(const std::string& path)
    : db_(open_database({.path = path, .create_if_missing = false})), thread_([this] { run(); }) {}

checkpointer::~checkpointer() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void checkpointer::request() {
  {
    std::lock_guard lock(mutex_);
    if (wanted_) return;
    wanted_ = true;
  }
  wake_.notify_one();
}

void checkpointer::run() {
  pthread_setname_np(pthread_self(), "surge-checkpt");
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] { return wanted_ || stopping_; });
    if (stopping_) return;
    wanted_ = false;
    lock.unlock();
    // PASSIVE copies what no reader still needs and never blocks a writer; a busy or partial
    // checkpoint is normal and the next request finishes the job.
    sqlite3_wal_checkpoint_v2(db_.getHandle(), nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr,
                              nullptr);
    runs_.fetch_add(1, std::memory_order_relaxed);
    lock.lock();
  }
}

}  // namespace surge::storage::sqlite
