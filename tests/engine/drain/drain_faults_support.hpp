#pragma once
// What the fault tests share: drain_faults_test.cpp (the endpoints),
// drain_faults_targets_test.cpp (non-public targets, redirects, TLS) and
// drain_faults_queue_test.cpp (the queue file and the processes around it).
#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <sys/types.h>

#include "tests/support/e2e.hpp"

namespace surge::testing {

struct timeouts {
  std::string connect = "1";
  std::string attempt = "1";
  // The CLI's floor, and at least 2 x attempt timeout + the claim horizon.
  std::string lease = "5";
};

// A drain that gives up on an endpoint within a second or two and retries soon, so that a row
// can fail twice within a test; --until-drained-wait makes it stay for those retries.
std::vector<std::string> fast_drain(const test_queue& queue, std::vector<std::string> extra = {},
                                    const timeouts& limits = {});

std::int64_t subscriber_at(test_queue& queue, const sink_process& sink, double rate = 1000,
                           int burst = 100);

struct attempt_record {
  std::int64_t attempt = 0;
  double seconds = 0;  // finished_at - started_at
  int status = 0;      // 0: no response
  std::string error_class;
};

std::vector<attempt_record> attempts_of(test_queue& queue, std::int64_t delivery_id);

// Removes `flag` and its value.
void drop_option(std::vector<std::string>& args, const std::string& flag);

std::vector<sink_request> of_delivery(const std::vector<sink_request>& all, std::int64_t id);

// Rows still leased (and not finished): what a killed drainer held.
std::set<std::int64_t> leased_rows(test_queue& queue);

// The sink's record while it keeps running (it flushes every 100 ms).
std::vector<sink_request> record_so_far(const sink_process& sink);

// Polls the record until it has at least `count` requests.
bool wait_for_requests(const sink_process& sink, std::size_t count,
                       std::chrono::milliseconds timeout);

// Waits until every thread of `pid` is stopped (SIGSTOP is delivered asynchronously).
bool wait_until_stopped(pid_t pid);

}  // namespace surge::testing
