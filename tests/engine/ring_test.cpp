#include "engine/ring.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <string>

namespace surge::engine {
namespace {

TEST(Ring, KeepsFirstInFirstOutOrderAcrossWrapsAndGrowth) {
  ring<std::string> queue;
  std::deque<std::string> model;
  int next = 0;
  // Uneven pushes and pops make the buffer wrap, then grow while wrapped.
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < round % 7 + 1; ++i) {
      queue.push_back(std::to_string(next));
      model.push_back(std::to_string(next));
      ++next;
    }
    for (int i = 0; i < round % 5 && !model.empty(); ++i) {
      ASSERT_EQ(queue.front(), model.front());
      queue.pop_front();
      model.pop_front();
    }
    ASSERT_EQ(queue.size(), model.size());
    for (std::size_t i = 0; i < model.size(); ++i) ASSERT_EQ(queue[i], model[i]);
  }
  std::size_t index = 0;
  for (const auto& item : queue) EXPECT_EQ(item, model[index++]);
  EXPECT_EQ(index, model.size());
}

TEST(Ring, UsedAsAStackAtTheFrontAndTrimmedAtTheBack) {
  ring<std::unique_ptr<int>> stack;  // move-only, as the idle list's connections are
  for (int i = 0; i < 20; ++i) stack.emplace_front(std::make_unique<int>(i));
  EXPECT_EQ(*stack.front(), 19);
  EXPECT_EQ(*stack.back(), 0);
  stack.pop_back();
  EXPECT_EQ(*stack.back(), 1);
  stack.pop_front();
  EXPECT_EQ(*stack.front(), 18);
  EXPECT_EQ(stack.size(), 18u);
}

TEST(Ring, SteadyUseKeepsItsStorage) {
  ring<std::string> queue;
  for (int i = 0; i < 100; ++i) queue.push_back(std::string(40, 'x'));
  const auto capacity = queue.capacity();
  const auto* storage = &queue.front();
  queue.clear();
  EXPECT_EQ(queue.capacity(), capacity);
  // A queue that moves along but never holds more than it once did does not reallocate.
  for (int i = 0; i < 10000; ++i) {
    queue.push_back("row");
    if (queue.size() > 50) queue.pop_front();
  }
  EXPECT_EQ(queue.capacity(), capacity);
  EXPECT_GE(&queue.front(), storage);
  EXPECT_LT(&queue.front(), storage + capacity);
}

}  // namespace
}  // namespace surge::engine
