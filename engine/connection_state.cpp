#include "engine/connection_state.hpp"

namespace surge::engine {

void connection_lifecycle::on_connected() { phase_ = connection_phase::idle; }

void connection_lifecycle::on_exchange_start() {
  phase_ = connection_phase::busy;
  ++exchanges_;
  response_started_ = false;
}

void connection_lifecycle::on_response_complete(bool keep_alive, bool read_whole) {
  if (phase_ != connection_phase::busy) return;
  phase_ = keep_alive && read_whole ? connection_phase::idle : connection_phase::closed;
}

void connection_lifecycle::on_failure() { phase_ = connection_phase::closed; }

bool connection_lifecycle::failure_warrants_fresh_retry() const {
  return exchanges_ > 1 && !response_started_;
}


}  // namespace surge::engine
