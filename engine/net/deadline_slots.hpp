#pragma once
// The deadlines of the exchanges under way on one HTTP client, so that one timer keeps them all.
// Beast's stream timer is armed and cancelled around every read and every write: a
// timer operation, a lock of the reactor's timer queue and often a timerfd_settime, two or three
// times a request. Here an exchange's deadline goes into a slot, and the timer wakes at the
// earliest deadline still pending: while exchanges keep finishing in time, about once per attempt
// timeout. Sans-I/O: the caller owns the timer and passes the clock in.
//
// `Item` carries `std::size_t deadline_slot`, its place here while it is watched, so that taking
// it out is constant time and allocates nothing.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <optional>
#include <vector>

namespace surge::engine {

template <class Item>
class deadline_slots {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  // Watches `item` until `deadline`. True when the timer must wake earlier than it is set to:
  // at `deadline` (it is then taken as set there; a caller may arm it before adding, having
  // compared with wake_at()).
  bool add(Item& item, time_point deadline) {
    item.deadline_slot = entries_.size();
    entries_.push_back({&item, deadline, false});
    if (deadline >= wake_at_) return false;
    wake_at_ = deadline;
    return true;
  }

  // Stops watching `item`. True when nothing is watched any more: the timer is not needed (it is
  // then taken as unset).
  bool remove(Item& item) {
    const std::size_t slot = item.deadline_slot;
    entries_[slot] = entries_.back();
    entries_[slot].item->deadline_slot = slot;
    entries_.pop_back();
    if (!entries_.empty()) return false;
    wake_at_ = time_point::max();
    return true;
  }

  // The timer woke at `now`: calls `expire(item)` once for each watched item whose deadline has
  // come. Returns when to wake next, or nullopt when no deadline is pending.
  template <class Expire>
  std::optional<time_point> on_wake(time_point now, Expire&& expire) {
    auto next = time_point::max();
    for (auto& entry : entries_) {
      if (entry.expired) continue;
      if (entry.deadline <= now) {
        entry.expired = true;
        expire(*entry.item);
      } else {
        next = std::min(next, entry.deadline);
      }
    }
    wake_at_ = next;
    if (next == time_point::max()) return std::nullopt;
    return next;
  }

  template <class Visit>
  void for_each(Visit&& visit) {
    for (auto& entry : entries_) visit(*entry.item);
  }

  std::size_t size() const { return entries_.size(); }
  // Where the timer is taken to be set; time_point::max() when unset.
  time_point wake_at() const { return wake_at_; }

 private:
  struct entry {
    Item* item;
    time_point deadline;
    bool expired;
  };
  std::vector<entry> entries_;
  time_point wake_at_ = time_point::max();
};

}  // namespace surge::engine
