#pragma once
// The sink's view of webhook_subscriber: secrets and schemes by id, re-read from the queue
// when an unknown id arrives so subscribers added after start are recognised.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "storage/connection.hpp"
#include "tools/sink/verdict.hpp"

namespace surge::sink {

class subscriber_directory {
 public:
  // Opens the queue (a file that must exist, or a postgresql:// URI) and loads every subscriber.
  // Throws storage::error.
  explicit subscriber_directory(const std::string& db_path);

  // Thread-safe. An unknown id triggers a reload unless one happened within the last second,
  // which keeps a flood of bogus ids from hammering the database.
  std::optional<subscriber_key> find(std::int64_t id);

  std::size_t reloads() const;

 private:
  void reload_locked();

  mutable std::mutex mutex_;
  storage::connection db_;
  std::unordered_map<std::int64_t, subscriber_key> by_id_;
  std::optional<std::chrono::steady_clock::time_point> last_miss_reload_;
  std::size_t reloads_ = 0;
};

}  // namespace surge::sink
