#pragma once

// A double-ended queue that keeps its storage: a ring buffer that doubles when full and never
// shrinks. The hot path's queues (a subscriber's ready rows, an origin's idle connections) pass
// every delivery through them; std::deque frees and allocates a node every few elements as a
// queue moves along, a malloc and a free on the shard per few deliveries (issue 12).
#include <algorithm>
#include <cstddef>
#include <utility>

#include <boost/circular_buffer.hpp>

namespace surge::engine {

template <typename T>
class ring {
 public:
  using iterator = typename boost::circular_buffer<T>::iterator;
  using const_iterator = typename boost::circular_buffer<T>::const_iterator;

  template <typename... Args>
  T& emplace_back(Args&&... args) {
    make_room();
    items_.push_back(T(std::forward<Args>(args)...));
    return items_.back();
  }
  template <typename... Args>
  T& emplace_front(Args&&... args) {
    make_room();
    items_.push_front(T(std::forward<Args>(args)...));
    return items_.front();
  }
  void push_back(T item) { emplace_back(std::move(item)); }

  void pop_front() { items_.pop_front(); }
  void pop_back() { items_.pop_back(); }
  T& front() { return items_.front(); }
  const T& front() const { return items_.front(); }
  T& back() { return items_.back(); }
  const T& back() const { return items_.back(); }
  T& operator[](std::size_t index) { return items_[index]; }
  const T& operator[](std::size_t index) const { return items_[index]; }

  iterator begin() { return items_.begin(); }
  iterator end() { return items_.end(); }
  const_iterator begin() const { return items_.begin(); }
  const_iterator end() const { return items_.end(); }

  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  std::size_t capacity() const { return items_.capacity(); }
  // Destroys the elements and keeps the storage.
  void clear() { items_.clear(); }

 private:
  static constexpr std::size_t first_capacity = 8;

  void make_room() {
    if (items_.full()) items_.set_capacity(std::max(first_capacity, items_.capacity() * 2));
  }

  boost::circular_buffer<T> items_;
};

}  // namespace surge::engine
