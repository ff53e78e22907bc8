#pragma once
// The file descriptors a drain may open, and how many partner connections fit in them.
// Each partner connection is a descriptor, thousands at once to far partners, while a shell or
// a service often starts a program with a soft limit of 1,024 (kept low for select(), which
// Surge does not use) under a hard limit that allows far more. A connect past the limit fails
// as if the partner had refused it, so the drain raises its soft limit to the hard one at start
// and fits its connections within what that gives.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/config.hpp"

namespace surge::tools {

// Kept for everything but partner connections: the queue's files and database connections,
// the metrics listener and its clients (at most 32), and per shard its epoll, timer and event
// descriptors and its DNS sockets. An idle drain with two shards holds about 30.
inline constexpr std::uint64_t descriptors_besides_connections = 240;
inline constexpr std::uint64_t descriptors_per_shard = 8;

// Requests in flight may hold three quarters of the partner connections. In flight moves
// between partners faster than their idle connections go, each partner keeping what its own
// peak needed, and at the ceiling a request to a partner with no idle connection closes
// another's: held to all of them, slow partners under a limit of 1,024 opened a connection for
// every fourth request (docs/benchmarks.md, "Under a file limit").
inline constexpr std::uint64_t in_flight_quarters_of_connections = 3;

struct connection_budget {
  int max_in_flight = 0;            // no more requests than connections fit
  std::size_t max_connections = 0;  // partner connections open at once, idle ones included
  std::string lowered;              // why max_in_flight was lowered, when it was (a warning)
};

// What a process of `shards` shards that may open `open_files` files gives its partner
// connections. Throws usage_error when that leaves less than a request in flight per shard, or
// when a --max-in-flight the operator gave (on the command line or in a config file) does not
// fit.
connection_budget budget_connections(std::uint64_t open_files, int shards, int max_in_flight,
                                     bool max_in_flight_given);

// Raises the process's soft limit to its hard limit and fits `config`'s in-flight and
// connection ceilings within it, for `shards` shards (engine::shard_count). Returns the
// warning to log when the default in-flight ceiling was lowered (else empty); throws as
// budget_connections does.
std::string fit_connections_to_file_limit(engine::drain_config& config, int shards,
                                          bool max_in_flight_given);

// Only the raise, for a program whose connections are not budgeted (surge sink); never throws.
void raise_soft_file_limit();

}  // namespace surge::tools
