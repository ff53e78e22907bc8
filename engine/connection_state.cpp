#include "engine/connection_state.hpp"

namespace surge::engine {

void connection_lifecycle::on_connected() { phase_ = connection_phase::idle; }

void connection_lifecycle::on_exchange_start() {
  phase_ = connection_phase::busy;
  ++exchanges_;
  response_started_ = false;
}

void connection_lifecycle::on_response_complete(bool keep_alive, bool read_whole,
                                                steady_time now) {
  if (phase_ != connection_phase::busy) return;
  if (keep_alive && read_whole) {
    phase_ = connection_phase::idle;
    idle_since_ = now;
  } else {
    phase_ = connection_phase::closed;
  }
}

void connection_lifecycle::on_failure() { phase_ = connection_phase::closed; }

bool connection_lifecycle::failure_warrants_fresh_retry() const {
  return exchanges_ > 1 && !response_started_;
}

bool connection_lifecycle::idle_since(steady_time& since) const {
  if (phase_ != connection_phase::idle) return false;
  since = idle_since_;
  return true;
}

}  // namespace surge::engine
