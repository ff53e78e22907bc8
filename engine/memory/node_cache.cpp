#include "engine/memory/node_cache.hpp"

#include <new>
#include <vector>

namespace surge::engine::node_cache {
namespace {

struct size_class {
  std::size_t bytes = 0;
  std::vector<void*> blocks;
};

// A handful of sizes in practice (a deque's node and its map), so a linear search.
struct thread_cache {
  std::vector<size_class> classes;

  thread_cache() = default;
  thread_cache(const thread_cache&) = delete;
  thread_cache& operator=(const thread_cache&) = delete;
  ~thread_cache() {
    for (auto& sizes : classes) {
      for (void* block : sizes.blocks) ::operator delete(block);
    }
  }

  size_class* find(std::size_t bytes) {
    for (auto& sizes : classes) {
      if (sizes.bytes == bytes) return &sizes;
    }
    return nullptr;
  }
};

thread_cache& local() {
  thread_local thread_cache cache;
  return cache;
}

}  // namespace

void* take(std::size_t bytes) {
  if (auto* sizes = local().find(bytes); sizes != nullptr && !sizes->blocks.empty()) {
    void* block = sizes->blocks.back();
    sizes->blocks.pop_back();
    return block;
  }
  return ::operator new(bytes);
}

void give(void* block, std::size_t bytes) noexcept {
  if (block == nullptr) return;
  try {
    auto& cache = local();
    auto* sizes = cache.find(bytes);
    if (sizes == nullptr) sizes = &cache.classes.emplace_back(size_class{bytes, {}});
    sizes->blocks.push_back(block);
  } catch (const std::bad_alloc&) {
    ::operator delete(block);  // no room to remember it: give it back to the heap
  }
}

std::size_t cached_blocks() {
  std::size_t total = 0;
  for (const auto& sizes : local().classes) total += sizes.blocks.size();
  return total;
}

}  // namespace surge::engine::node_cache
