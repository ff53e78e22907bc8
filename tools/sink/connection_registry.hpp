#pragma once
// Open connections by id, so that stopping the sink can close the ones that would otherwise
// never end on their own (hang, long delays, idle keep-alive).
#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>

namespace surge::sink {

class connection_registry {
 public:
  using closer = std::function<void()>;

  // False once close_all() ran: the caller must close the connection itself.
  bool add(std::uint64_t id, closer close);
  void remove(std::uint64_t id);
  // Calls every closer (outside the lock: closers may post and must not deadlock with remove).
  void close_all();

 private:
  std::mutex mutex_;
  bool closed_ = false;
  std::unordered_map<std::uint64_t, closer> open_;
};

}  // namespace surge::sink
