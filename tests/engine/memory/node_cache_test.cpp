#include "engine/memory/node_cache.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <string>
#include <thread>

namespace surge::engine {
namespace {

TEST(NodeCache, AFreedBlockIsTheNextOneOfItsSize) {
  // Other tests on this thread may have left blocks of these sizes; counts are relative.
  void* first = node_cache::take(480);
  void* other_size = node_cache::take(96);
  const auto cached = node_cache::cached_blocks();
  node_cache::give(other_size, 96);
  node_cache::give(first, 480);
  EXPECT_EQ(node_cache::cached_blocks(), cached + 2);
  EXPECT_EQ(node_cache::take(480), first);
  EXPECT_EQ(node_cache::take(96), other_size);
  EXPECT_EQ(node_cache::cached_blocks(), cached);
  node_cache::give(first, 480);
  node_cache::give(other_size, 96);
}

TEST(NodeCache, AQueueMovingAlongReusesItsNodesAndKeepsItsOrder) {
  std::deque<std::string, node_cache_allocator<std::string>> queue;
  std::deque<std::string> model;
  int next = 0;
  auto step = [&] {
    queue.push_back(std::to_string(next));
    model.push_back(std::to_string(next));
    ++next;
    if (queue.size() > 50) {
      ASSERT_EQ(queue.front(), model.front());
      queue.pop_front();
      model.pop_front();
    }
  };
  for (int i = 0; i < 1000; ++i) step();
  // Warm: from here on the nodes freed at the front are those taken at the back.
  const auto cached = node_cache::cached_blocks();
  for (int i = 0; i < 10000; ++i) {
    step();
    ASSERT_LE(node_cache::cached_blocks(), cached + 1);
  }
  ASSERT_EQ(queue.size(), model.size());
  for (std::size_t i = 0; i < model.size(); ++i) EXPECT_EQ(queue[i], model[i]);
}

TEST(NodeCache, EachThreadKeepsItsOwnBlocks) {
  void* block = node_cache::take(200);
  node_cache::give(block, 200);
  void* elsewhere = nullptr;
  std::thread other([&] {
    elsewhere = node_cache::take(200);
    node_cache::give(elsewhere, 200);  // freed with that thread's cache
  });
  other.join();
  EXPECT_NE(elsewhere, nullptr);
  EXPECT_NE(elsewhere, block);  // this thread's cached block was not handed to the other
  EXPECT_EQ(node_cache::take(200), block);  // still this thread's
  node_cache::give(block, 200);
}

}  // namespace
}  // namespace surge::engine
