// The shards allocate nothing per delivery once warm: a real drain, in this process,
// into nginx on loopback, with the sanitizer runtime's malloc hook counting what the threads
// named surge-shard allocate. Two drains of different sizes; the difference between their
// counts, divided by the difference in rows, is what each further delivery costs, free of what
// start-up, connections and the periodic work cost. Its own binary: the hook sees the whole
// process. Runs under the sanitizer presets (dev, tsan), where the hook exists.
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "engine/drain.hpp"
#include "tests/support/e2e.hpp"
#include "tests/support/nginx.hpp"

extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void*,
                                                                             std::size_t),
                                                         void (*free_hook)(const volatile void*))
    __attribute__((weak));

namespace surge::testing {
namespace {

std::atomic<long> shard_allocations{0};

// Called on the allocating thread. The name is read with the raw system call: the hook runs
// inside the sanitizer's allocator, where intercepted functions are best left alone. A thread
// is named when it starts, so a positive answer is kept.
void count_shard_allocation(const volatile void*, std::size_t) {
  thread_local bool on_a_shard = false;
  if (!on_a_shard) {
    char name[17] = {};
    if (::syscall(SYS_prctl, PR_GET_NAME, name, 0, 0, 0) != 0) return;
    on_a_shard = std::strcmp(name, "surge-shard") == 0;
    if (!on_a_shard) return;
  }
  shard_allocations.fetch_add(1, std::memory_order_relaxed);
}

void ignore_free(const volatile void*) {}

constexpr int subscribers = 4;

// Drains `rows_each` rows for each of four unthrottled subscribers into nginx and returns what
// the shards allocated meanwhile.
long shard_allocations_for(std::uint16_t port, int rows_each, bool origin_limit) {
  temp_dir dir;
  test_queue queue(dir);
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/hook";
  for (int i = 0; i < subscribers; ++i) {
    const auto id = queue.add_subscriber(url, 1e6, 1000000);
    queue.add_rows(id, rows_each, std::string(300, 'x'));
  }
  engine::drain_config config;
  config.storage.db_path = queue.path();
  config.threads = 2;
  config.until_drained = true;
  config.progress = false;
  config.status = engine::drain_config::status_line::off;
  config.http.allow_private_targets = true;
  // Off: a fixed number in flight (four subscribers at sixteen each). On (the default), the
  // adaptive limit lets the concurrency, and with it the connections and coroutines alive at
  // once, differ between the two drains; its own bookkeeping is counted too.
  if (!origin_limit) config.scheduler.origin.latency_tolerance = 0;
  const long before = shard_allocations.load();
  const auto summary = engine::run_drain(config);
  const long allocations = shard_allocations.load() - before;
  EXPECT_TRUE(summary.drained);
  EXPECT_EQ(summary.delivered, static_cast<std::int64_t>(subscribers) * rows_each);
  EXPECT_EQ(queue.count_by_status()["done"], static_cast<std::int64_t>(subscribers) * rows_each);
  return allocations;
}

// Allocations per further delivery on the shards, from two drains into one nginx.
double per_further_delivery(bool origin_limit) {
  temp_dir server_dir;
  const auto root = server_dir.file("nginx");
  std::filesystem::create_directories(root);
  const auto port = unused_port();
  {
    std::ofstream conf(root + "/nginx.conf");
    conf << nginx_conf_prelude(root)
         << "  access_log off;\n  server {\n    listen 127.0.0.1:" << port
         << ";\n    keepalive_requests 1000000;\n"
         << "    location = /ready { return 204; }\n    location / { return 204; }\n  }\n}\n";
  }
  auto server = start_nginx(*nginx_binary(), root, port);

  constexpr int small = 250;
  constexpr int large = 2250;
  const long in_small = shard_allocations_for(port, small, origin_limit);
  const long in_large = shard_allocations_for(port, large, origin_limit);
  EXPECT_GT(in_small, 0) << "the hook saw nothing on the shards";
  const double per_delivery =
      static_cast<double>(in_large - in_small) / (subscribers * (large - small));
  std::cout << "shard allocations" << (origin_limit ? "" : " (origin limit off)") << ": "
            << in_small << " for " << subscribers * small << " deliveries, " << in_large << " for "
            << subscribers * large << "; " << per_delivery << " per further delivery\n";
  return per_delivery;
}

class ShardAllocations : public ::testing::Test {
 protected:
  void SetUp() override {
    if (__sanitizer_install_malloc_and_free_hooks == nullptr) {
      GTEST_SKIP() << "needs a sanitizer runtime's malloc hook (the dev and tsan presets)";
    }
    if (!nginx_binary()) GTEST_SKIP() << "nginx is not installed (Debian package nginx-light)";
    // Once per process: a hook installed twice would count every allocation twice.
    static const int installed =
        __sanitizer_install_malloc_and_free_hooks(count_shard_allocation, ignore_free);
    ASSERT_GT(installed, 0);
  }
};

// Without the shards' allocation caches this is about 7 (coroutine frames, the send operation,
// deque nodes, the outcome vector growing); one allocation made per delivery adds 1. What grows
// with time rather than with rows (an outcome batch handed over every 5 ms, a demand round) is
// counted too, about 0.1 at the sanitizers' speed, and more on a loaded machine.
constexpr double bound = 0.5;

TEST_F(ShardAllocations, AFurtherDeliveryAllocatesNothingAtAFixedConcurrency) {
  EXPECT_LT(per_further_delivery(false), bound);
}

TEST_F(ShardAllocations, AFurtherDeliveryAllocatesNothingWithTheDefaults) {
  // The origin limit on, as a drain runs without flags; connections it opens as its limit grows
  // are counted in the larger drain only.
  EXPECT_LT(per_further_delivery(true), bound);
}

}  // namespace
}  // namespace surge::testing
