#pragma once
// Adaptive rate on pushback (sans-I/O): repeated 429/503 answers lower a subscriber's effective
// rate below its configured one (multiplicative decrease), sustained success raises it back
// (additive increase), never above the configured limit.
#include <chrono>

namespace surge::engine {

struct adaptive_rate_config {
  double decrease_factor = 0.5;
  // At most one decrease per this long: the answers to requests already in flight at the first
  // 429 must not collapse the rate several times over.
  std::chrono::milliseconds decrease_spacing{std::chrono::seconds(1)};
  // Recovery per second of success, as a fraction of the configured rate.
  double increase_per_second = 0.05;
  double floor_fraction = 0.01;  // never below this fraction of the configured rate

  friend bool operator==(const adaptive_rate_config&, const adaptive_rate_config&) = default;
};

class adaptive_rate {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  adaptive_rate(double configured, adaptive_rate_config config = {})
      : config_(config), configured_(configured), effective_(configured) {}

  double effective() const { return effective_; }
  double configured() const { return configured_; }

  // Returns true when the effective rate changed.
  bool on_pushback(time_point now);
  bool on_success(time_point now);
  // A new configured limit: the effective rate keeps its reduction but never exceeds it.
  void reconfigure(double configured);

 private:
  adaptive_rate_config config_;
  double configured_;
  double effective_;
  time_point last_decrease_{};
  time_point last_increase_{};
  bool reduced_ = false;
};

}  // namespace surge::engine
