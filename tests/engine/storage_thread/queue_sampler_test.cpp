// How often the partner view's queue sample runs: its interval, stretched on a queue so large
// that a sample is slow.
#include "engine/storage_thread/queue_sampler.hpp"

#include <gtest/gtest.h>

namespace surge::engine {
namespace {

using namespace std::chrono_literals;

TEST(QueueSampler, ASlowSampleStretchesTheWaitToFiftyTimesWhatItTook) {
  EXPECT_EQ(sample_wait(5000ms, 20ms), 5000ms);   // a small queue: every 5 s
  EXPECT_EQ(sample_wait(5000ms, 100ms), 5000ms);  // exactly 2 %
  EXPECT_EQ(sample_wait(5000ms, 400ms), 20000ms);
}

}  // namespace
}  // namespace surge::engine
