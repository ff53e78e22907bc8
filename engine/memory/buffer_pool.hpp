#pragma once
// Request buffers a shard lends its attempts. Each keeps the capacity it grew to, so in steady
// traffic every request is written into memory already allocated. Not thread-safe: it lives on
// its shard's thread.
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace surge::engine {

class buffer_pool {
 public:
  // A buffer grown past this (a large batch) is freed instead of kept.
  explicit buffer_pool(std::size_t keep_capacity = 64 * 1024) : keep_capacity_(keep_capacity) {}

  std::string take() {
    if (free_.empty()) return {};
    std::string buffer = std::move(free_.back());
    free_.pop_back();
    return buffer;
  }

  void give_back(std::string buffer) {
    if (buffer.capacity() > keep_capacity_) return;
    buffer.clear();
    free_.push_back(std::move(buffer));
  }

  std::size_t idle() const { return free_.size(); }

 private:
  std::size_t keep_capacity_;
  std::vector<std::string> free_;
};

}  // namespace surge::engine
