#include "storage/sqlite/wal_meter.hpp"

#include <algorithm>

#include <sqlite3.h>

namespace surge::storage::sqlite {

int checkpoint_frames_for(int configured, std::uint64_t free_bytes, int page_bytes) {
  if (page_bytes <= 0) return configured;
  // A frame is a page plus its 24-byte header.
  const std::uint64_t frame_bytes = static_cast<std::uint64_t>(page_bytes) + 24;
  const std::uint64_t room = free_bytes / 4 / frame_bytes;
  if (room >= static_cast<std::uint64_t>(configured)) return configured;
  return std::min(configured, std::max(min_checkpoint_frames, static_cast<int>(room)));
}

wal_meter::wal_meter(SQLite::Database& db, wal_meter_config config) : db_(db), config_(config) {
  // The WAL may hold other connections' frames already: a passive checkpoint (harmless, and
  // useful at start) reports its length, so the first commit counts only its own frames.
  int frames = 0;
  int copied = 0;
  if (sqlite3_wal_checkpoint_v2(db_.getHandle(), nullptr, SQLITE_CHECKPOINT_PASSIVE, &frames,
                                &copied) == SQLITE_OK &&
      frames > 0) {
    last_wal_frames_.store(frames, std::memory_order_relaxed);
  }
  sqlite3_wal_hook(db_.getHandle(), &wal_meter::hook, this);
}

wal_meter::~wal_meter() {
  // Back to SQLite's default behaviour for whoever keeps using the connection.
  sqlite3_wal_autocheckpoint(db_.getHandle(), config_.checkpoint_frames);
}

int wal_meter::hook(void* context, sqlite3* handle, const char* schema, int wal_frames) {
  auto& self = *static_cast<wal_meter*>(context);
  const int before = self.last_wal_frames_.exchange(wal_frames, std::memory_order_relaxed);
  // A WAL shorter than before was restarted (written again from its start) by this commit.
  const int written = wal_frames > before ? wal_frames - before : wal_frames;
  self.commits_.fetch_add(1, std::memory_order_relaxed);
  self.frames_.fetch_add(written, std::memory_order_relaxed);
  if (wal_frames < self.config_.checkpoint_frames) return SQLITE_OK;
  if (self.config_.checkpoint_on_commit) {
    // What sqlite3WalDefaultHook does; a busy checkpoint is not an error of the commit.
    sqlite3_wal_checkpoint_v2(handle, schema, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  }
  if (self.wanted_) self.wanted_();
  return SQLITE_OK;
}

}  // namespace surge::storage::sqlite
