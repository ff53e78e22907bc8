#pragma once
// Where a subscriber's next claim may start its seek: just after the last row this drain claimed
// for it, in the claim's order (next_attempt_at, id). The rows before that point are this drain's
// own, leased and in flight, or finished; a seek from the start walks past every one of them
// again, and on PostgreSQL past every finished row's dead index entry until vacuum removes it.
// A row can still fall due before the point (a retry, an expired lease, a row another session
// held when the claim skipped it), so a point is forgotten once its claim came back short (the
// backlog ahead ran out) and a second after it was set. Pure: the caller passes the time in.
#include <cstdint>
#include <limits>
#include <span>
#include <unordered_map>

namespace surge::storage {

struct resume_point {
  double next_attempt_at = -std::numeric_limits<double>::infinity();
  std::int64_t id = 0;
};

class resume_points {
 public:
  static constexpr double keep_seconds = 1.0;

  // Where `subscriber`'s next seek starts: the start of its rows when there is no point.
  resume_point at(std::int64_t subscriber, double now) const {
    const auto found = points_.find(subscriber);
    if (found == points_.end() || now - found->second.set_at >= keep_seconds ||
        now < found->second.set_at) {
      return {};
    }
    return found->second.point;
  }
  // A claim asked `asked` rows of `subscriber` and got `got`, the last of them `last`.
  void after_claim(std::int64_t subscriber, int asked, int got, resume_point last, double now) {
    if (got < asked || got == 0) {
      points_.erase(subscriber);
      return;
    }
    auto& entry = points_[subscriber];
    // Kept from when it was first set: the point moves on, but every keep_seconds the seek
    // starts from the beginning once.
    if (entry.set_at == 0 || now - entry.set_at >= keep_seconds) entry.set_at = now;
    entry.point = last;
  }

 private:
  struct entry {
    resume_point point;
    double set_at = 0;
  };
  std::unordered_map<std::int64_t, entry> points_;
};

}  // namespace surge::storage
