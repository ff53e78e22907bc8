#include "engine/net/handshake_gate.hpp"

namespace surge::engine {

first_handshake_gate::decision first_handshake_gate::on_connect(bool session_available,
                                                                time_point now) {
  if (session_available) return {step::resume};
  if (now < not_waiting_until_) return {step::full};
  if (full_under_way_) return {step::wait};
  full_under_way_ = true;
  return {step::full_for_all, ++turn_};
}

void first_handshake_gate::on_session_stored() { full_under_way_ = false; }

void first_handshake_gate::on_full_for_all_done(std::uint64_t turn, bool handshake_succeeded,
                                                time_point now) {
  if (!full_under_way_ || turn != turn_) return;  // its session came: already open
  full_under_way_ = false;
  if (handshake_succeeded) not_waiting_until_ = now + no_session_hold_;
}

}  // namespace surge::engine
