#include "tools/file_limit.hpp"

#include <algorithm>
#include <limits>

#include <sys/resource.h>

#include "tools/commands.hpp"

namespace surge::tools {
namespace {

std::string limit_text(std::uint64_t open_files) {
  return "this process may open " + std::to_string(open_files) +
         " files (`ulimit -Hn`; LimitNOFILE= in a systemd unit)";
}

// The soft limit after raising it to the hard one (the old one if the kernel refused); 0 when
// the limit cannot be read.
std::uint64_t raise_to_hard() {
  rlimit now{};
  if (getrlimit(RLIMIT_NOFILE, &now) != 0) return 0;
  if (now.rlim_cur >= now.rlim_max) return now.rlim_cur;
  const rlimit raised{now.rlim_max, now.rlim_max};
  return setrlimit(RLIMIT_NOFILE, &raised) == 0 ? now.rlim_max : now.rlim_cur;
}

}  // namespace

connection_budget budget_connections(std::uint64_t open_files, int shards, int max_in_flight,
                                     bool max_in_flight_given) {
  const auto shard_count = static_cast<std::uint64_t>(std::max(shards, 1));
  const auto kept = descriptors_besides_connections + descriptors_per_shard * shard_count;
  const auto for_connections = open_files > kept ? open_files - kept : 0;
  // Three quarters, without overflow however large the limit.
  const auto in_flight_fits = for_connections / 4 * in_flight_quarters_of_connections +
                              for_connections % 4 * in_flight_quarters_of_connections / 4;
  if (in_flight_fits < shard_count) {
    throw usage_error(limit_text(open_files) + "; a drain of " + std::to_string(shard_count) +
                      " shards keeps " + std::to_string(kept) +
                      " for its queue and reactors, and needs a few partner connections per "
                      "shard besides: raise the limit or lower --threads");
  }
  connection_budget budget;
  budget.max_connections = static_cast<std::size_t>(
      std::min<std::uint64_t>(for_connections, std::numeric_limits<std::size_t>::max()));
  budget.max_in_flight = max_in_flight;
  if (static_cast<std::uint64_t>(max_in_flight) <= in_flight_fits) return budget;
  const auto why = limit_text(open_files) + ", " + std::to_string(for_connections) +
                   " of them for partner connections, idle ones included, of which requests in "
                   "flight may hold " +
                   std::to_string(in_flight_fits);
  if (max_in_flight_given) {
    throw usage_error("--max-in-flight " + std::to_string(max_in_flight) + " does not fit: " + why +
                      "; lower --max-in-flight or raise the limit");
  }
  budget.max_in_flight = static_cast<int>(in_flight_fits);
  budget.lowered = "requests in flight held to " + std::to_string(in_flight_fits) + " instead of " +
                   std::to_string(max_in_flight) + ": " + why + "; raise the limit for more";
  return budget;
}

std::string fit_connections_to_file_limit(engine::drain_config& config, int shards,
                                          bool max_in_flight_given) {
  // Budgeted on what the process really has: the soft limit, raised or not.
  const auto open_files = raise_to_hard();
  if (open_files == 0) return {};  // unknown: nothing to fit to
  const auto budget =
      budget_connections(open_files, shards, config.scheduler.max_in_flight, max_in_flight_given);
  config.scheduler.max_in_flight = budget.max_in_flight;
  config.http.max_connections = budget.max_connections;
  return budget.lowered;
}

void raise_soft_file_limit() { raise_to_hard(); }

}  // namespace surge::tools
