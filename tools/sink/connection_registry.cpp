#include "tools/sink/connection_registry.hpp"

#include <utility>

namespace surge::sink {

bool connection_registry::add(std::uint64_t id, closer close) {
  std::lock_guard lock(mutex_);
  if (closed_) return false;
  open_.emplace(id, std::move(close));
  return true;
}

void connection_registry::remove(std::uint64_t id) {
  std::lock_guard lock(mutex_);
  open_.erase(id);
}

void connection_registry::close_all() {
  std::unordered_map<std::uint64_t, closer> open;
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
    open.swap(open_);
  }
  for (auto& [id, close] : open) close();
}

}  // namespace surge::sink
