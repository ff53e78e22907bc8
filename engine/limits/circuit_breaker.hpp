#pragma once
// Per-subscriber circuit breaker (sans-I/O). After `failure_threshold` consecutive failures an
// endpoint gets one probe per cool-down instead of a request per row; the cool-down doubles on
// every failed probe up to `max_cooldown`; a successful probe closes the circuit.
#include <chrono>

namespace surge::engine {

struct circuit_config {
  // High enough that an endpoint failing a third of the time almost never trips it
  // (0.33^10 ≈ 1.5e-5 per request), low enough that a dead one is spared within a second.
  int failure_threshold = 10;
  std::chrono::milliseconds base_cooldown{std::chrono::seconds(1)};
  std::chrono::milliseconds max_cooldown{std::chrono::seconds(60)};
  // An open circuit whose cool-down has grown this far (probes failed in a row) counts as a
  // persistently failing endpoint: --until-drained stops waiting for its rows.
  std::chrono::milliseconds persistent_cooldown{std::chrono::seconds(4)};

  friend bool operator==(const circuit_config&, const circuit_config&) = default;
};

class circuit_breaker {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  enum class state { closed, open, probing };

  explicit circuit_breaker(circuit_config config = {}) : config_(config) {}

  // Whether a request may start now. When an open circuit's cool-down has passed this admits
  // exactly one probe and moves to `probing`; nothing else starts until it is answered.
  bool try_admit(time_point now);
  // Failures that say the endpoint is unwell: 5xx, timeouts, connection and TLS errors. A
  // failure of a request that started before the circuit opened changes nothing more.
  void on_failure(time_point now);
  void on_success();
  // The probe was never written (it gave up at the wire gate): it says nothing about the
  // endpoint, so the circuit is open again with another probe due at once.
  void on_probe_unsent(time_point now);

  state current() const { return state_; }
  // True from opening until the probe is answered: rows should not be claimed meanwhile.
  bool blocking() const { return state_ != state::closed; }
  time_point next_probe_at() const { return open_until_; }
  // When the circuit last opened from closed (probes that fail keep it): meaningful while
  // blocking(), for the operator's "open since".
  time_point opened_at() const { return opened_at_; }
  std::chrono::milliseconds cooldown() const { return cooldown_; }
  bool persistently_open() const {
    return state_ != state::closed && cooldown_ >= config_.persistent_cooldown;
  }

 private:
  void open(time_point now);

  circuit_config config_;
  state state_ = state::closed;
  int consecutive_failures_ = 0;
  std::chrono::milliseconds cooldown_{0};
  time_point open_until_{};
  time_point opened_at_{};
};

}  // namespace surge::engine
