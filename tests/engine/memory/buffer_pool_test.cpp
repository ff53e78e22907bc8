#include "engine/memory/buffer_pool.hpp"

#include <gtest/gtest.h>

namespace surge::engine {
namespace {

TEST(BufferPool, ABufferGivenBackIsLentAgainEmptyWithItsMemory) {
  buffer_pool pool;
  auto buffer = pool.take();
  buffer.assign(3000, 'x');
  const auto* memory = buffer.data();
  pool.give_back(std::move(buffer));
  EXPECT_EQ(pool.idle(), 1u);
  auto again = pool.take();
  EXPECT_TRUE(again.empty());
  EXPECT_EQ(again.data(), memory);
  EXPECT_GE(again.capacity(), 3000u);
  EXPECT_EQ(pool.idle(), 0u);
  // Lent out, so the next one is new.
  EXPECT_NE(pool.take().data(), memory);
}

TEST(BufferPool, ABufferGrownPastTheCapIsNotKept) {
  buffer_pool pool(1024);
  auto big = pool.take();
  big.assign(4096, 'x');
  pool.give_back(std::move(big));
  EXPECT_EQ(pool.idle(), 0u);
  auto small = pool.take();
  small.assign(100, 'x');
  pool.give_back(std::move(small));
  EXPECT_EQ(pool.idle(), 1u);
}

}  // namespace
}  // namespace surge::engine
