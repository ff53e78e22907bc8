#include "engine/net/connection_state.hpp"

namespace surge::engine {

void connection_lifecycle::on_connected() { phase_ = connection_phase::idle; }

void connection_lifecycle::on_exchange_start() {
  phase_ = connection_phase::busy;
  ++exchanges_;
  response_started_ = false;
}

bool reusable_after(const response_end& end) {
  return end.final_status && !end.switching_protocols && end.keep_alive && end.read_whole &&
         !end.bytes_left && !end.early;
}

void connection_lifecycle::on_response_complete(const response_end& end) {
  if (phase_ != connection_phase::busy) return;
  phase_ = reusable_after(end) ? connection_phase::idle : connection_phase::closed;
}

void connection_lifecycle::on_failure() {
  phase_ = connection_phase::closed;
  failed_ = true;
}

void connection_lifecycle::on_idle_check(bool input_pending) {
  if (phase_ == connection_phase::idle && input_pending) phase_ = connection_phase::closed;
}

bool connection_lifecycle::retry_on_fresh_connection(steady_time now, steady_time deadline) const {
  return failed_ && exchanges_ > 1 && !response_started_ && now < deadline;
}

}  // namespace surge::engine
