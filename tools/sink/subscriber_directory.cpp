#include "tools/sink/subscriber_directory.hpp"

#include <exception>
#include <iostream>

#include "storage/database.hpp"
#include "storage/subscribers.hpp"

namespace surge::sink {

subscriber_directory::subscriber_directory(const std::string& db_path)
    : db_({.location = db_path, .create_if_missing = false}) {
  reload_locked();
}

std::optional<subscriber_key> subscriber_directory::find(std::int64_t id) {
  std::lock_guard lock(mutex_);
  auto found = by_id_.find(id);
  if (found == by_id_.end()) {
    const auto now = std::chrono::steady_clock::now();
    if (last_miss_reload_ && now - *last_miss_reload_ < std::chrono::seconds(1))
      return std::nullopt;
    last_miss_reload_ = now;
    try {
      reload_locked();
    } catch (const std::exception& error) {
      // A busy or briefly unreadable queue file must not take the receiver down; the old table
      // stays in force and the next miss retries.
      std::cerr << "surge sink: reloading subscribers failed: " << error.what() << "\n";
    }
    found = by_id_.find(id);
    if (found == by_id_.end()) return std::nullopt;
  }
  return found->second;
}

std::size_t subscriber_directory::reloads() const {
  std::lock_guard lock(mutex_);
  return reloads_;
}

void subscriber_directory::reload_locked() {
  std::unordered_map<std::int64_t, subscriber_key> fresh;
  for (auto& row : storage::load_subscribers(db_))
    fresh.emplace(row.id, subscriber_key{std::move(row.secret), std::move(row.signing)});
  by_id_ = std::move(fresh);
  ++reloads_;
}

}  // namespace surge::sink
